package consumer

import (
	"testing"

	"github.com/mqlite/mqlite/message"
	"github.com/stretchr/testify/require"
)

// TestRawRecordsAdd: records are copied one after another while they fit
// in cap(Buf); the first that does not fit changes nothing; reset keeps
// the memory.
func TestRawRecordsAdd(t *testing.T) {
	rr := RawRecords{Buf: make([]byte, 0, 10)}
	src := []byte("abcd")
	require.True(t, rr.Add(src, 5, 100, 40))
	src[0] = 'x' // the copy is rr's own
	require.True(t, rr.Add([]byte("efgh"), 6, 140, 40))
	require.False(t, rr.Add([]byte("ijk"), 7, 180, 39))
	require.True(t, rr.Full)
	require.Equal(t, "abcdefgh", string(rr.Buf))
	require.Equal(t, []RawRecord{
		{QueueOffset: 5, CommitLogOffset: 100, Start: 0, End: 4, StoreSize: 40},
		{QueueOffset: 6, CommitLogOffset: 140, Start: 4, End: 8, StoreSize: 40},
	}, rr.Recs)
	require.True(t, rr.Add([]byte("ij"), 7, 180, 38))
	buf := &rr.Buf[0]
	rr.reset()
	require.Empty(t, rr.Recs)
	require.False(t, rr.Full)
	require.Equal(t, 10, cap(rr.Buf))
	require.True(t, rr.Add([]byte("0123456789"), 8, 220, 46))
	require.Same(t, buf, &rr.Buf[0], "reset keeps the buffer")
}

// TestReadAheadGrow: buffers that ran out of room grow to half the
// consumer's ReadAheadBytes while it lasts, then stay as they are; a
// released grant serves the next queue.
func TestReadAheadGrow(t *testing.T) {
	m := &member{o: Options{ReadAheadBytes: 1 << 20}}
	var ras [3]readAhead
	for i := range ras {
		ras[i].grow(m)
	}
	require.Equal(t, 512<<10, cap(ras[0].recs.Buf))
	require.Equal(t, 512<<10, cap(ras[1].recs.Buf))
	require.Nil(t, ras[2].recs.Buf, "nothing left")
	require.EqualValues(t, 1<<20, m.readAheadUsed.Load())
	ras[0].grow(m) // grown already: no second grant
	require.EqualValues(t, 1<<20, m.readAheadUsed.Load())
	ras[1].release(m)
	require.EqualValues(t, 512<<10, m.readAheadUsed.Load())
	ras[2].grow(m)
	require.Equal(t, 512<<10, cap(ras[2].recs.Buf))
	for i := range ras {
		ras[i].release(m)
	}
	require.Zero(t, m.readAheadUsed.Load())

	small := &member{o: Options{ReadAheadBytes: 2 * readAheadStart}}
	var ra readAhead
	ra.grow(small) // half the budget is no larger than the start size
	require.Nil(t, ra.recs.Buf)
	require.Zero(t, small.readAheadUsed.Load())
}

// TestRawRecordsAddDecoded: a decoded record takes its payload's size of
// the budget that copied ones share, keeps its place in Recs between
// them, and is dropped by reset with the copies.
func TestRawRecordsAddDecoded(t *testing.T) {
	rr := RawRecords{Buf: make([]byte, 0, 10)}
	m1, m2 := new(message.MessageExt), new(message.MessageExt)
	require.True(t, rr.Add([]byte("ab"), 5, 100, 30))
	require.True(t, rr.Fits(6))
	require.True(t, rr.AddDecoded(m1, 6, 6, 130, 34))
	require.False(t, rr.Fits(3), "2 copied + 6 decoded of 10: 3 more do not fit")
	require.True(t, rr.Full)
	rr.Full = false
	require.False(t, rr.AddDecoded(m2, 3, 7, 164, 31))
	require.True(t, rr.Full)
	require.True(t, rr.Add([]byte("c"), 7, 164, 29))
	require.False(t, rr.Add([]byte("de"), 8, 193, 30), "1 byte left")
	require.Equal(t, "abc", string(rr.Buf))
	require.Equal(t, []RawRecord{
		{QueueOffset: 5, CommitLogOffset: 100, Start: 0, End: 2, StoreSize: 30},
		{QueueOffset: 6, CommitLogOffset: 130, StoreSize: 34, Msg: 1},
		{QueueOffset: 7, CommitLogOffset: 164, Start: 2, End: 3, StoreSize: 29},
	}, rr.Recs)
	require.Equal(t, []*message.MessageExt{m1}, rr.Msgs)
	msgs := rr.Msgs
	rr.reset()
	require.Nil(t, msgs[0], "reset drops the decoded messages")
	require.Empty(t, rr.Msgs)
	require.True(t, rr.Fits(10), "reset gives the whole budget back")

	// One fill decodes at most DirectDecodeAhead bytes, but always its
	// first record, if it fits the budget.
	big := RawRecords{Buf: make([]byte, 0, 4*DirectDecodeAhead)}
	require.True(t, big.AddDecoded(m1, DirectDecodeAhead+1, 0, 0, 1))
	require.False(t, big.Fits(1), "past DirectDecodeAhead")
	require.True(t, big.Full)
	big.reset()
	require.True(t, big.AddDecoded(m1, DirectDecodeAhead/2, 0, 0, 1))
	require.True(t, big.AddDecoded(m2, DirectDecodeAhead/2, 1, 1, 1))
	require.False(t, big.AddDecoded(m2, 1, 2, 2, 1))
	require.True(t, big.Add([]byte("copies still fit"), 2, 2, 1), "the bound is on decoded records only")
}

// TestReadAheadTakeDecoded: take hands over a record decoded as it was
// read, in its place between copied ones, and keeps no reference to it;
// a filter leaves it out as it would a copied one.
func TestReadAheadTakeDecoded(t *testing.T) {
	src := &decodeSrc{}
	ra := &readAhead{src: src, end: 3}
	ra.recs.Buf = make([]byte, 0, 64)
	big := &message.MessageExt{Message: message.Message{Topic: "t", Tags: "b"}, QueueOffset: 1}
	require.True(t, ra.recs.Add([]byte("x"), 0, 0, 10))
	require.True(t, ra.recs.AddDecoded(big, 20, 1, 10, 40))
	require.True(t, ra.recs.Add([]byte("y"), 2, 50, 10))
	p := &pq{sub: &subscription{}}
	out, next, err := ra.take(p, 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, next)
	require.Len(t, out, 3)
	require.EqualValues(t, []int64{0, 1, 2}, []int64{out[0].QueueOffset, out[1].QueueOffset, out[2].QueueOffset})
	require.Same(t, big, out[1])
	require.Nil(t, ra.recs.Msgs[0], "handed over: the buffer keeps no reference")
	require.Equal(t, 2, src.decoded, "only the copied records are decoded at take")

	// The filter rejects the decoded record (tags "b") as it would a copy.
	ra = &readAhead{src: src, end: 3}
	ra.recs.Buf = make([]byte, 0, 64)
	require.True(t, ra.recs.Add([]byte("x"), 0, 0, 10))
	require.True(t, ra.recs.AddDecoded(big, 20, 1, 10, 40))
	require.True(t, ra.recs.Add([]byte("y"), 2, 50, 10))
	p.sub.filter = notTags("b")
	out, next, err = ra.take(p, 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, next)
	require.Len(t, out, 2)
	require.EqualValues(t, []int64{0, 2}, []int64{out[0].QueueOffset, out[1].QueueOffset})
	require.Nil(t, ra.recs.Msgs[0])
}

// notTags is a Filter that passes every message but those with its tags.
type notTags string

func (notTags) MatchCode(uint32) bool           { return true }
func (f notTags) Match(m *message.Message) bool { return m.Tags != string(f) }
func (notTags) Type() string                    { return "TAG" }
func (f notTags) String() string                { return "not " + string(f) }

// decodeSrc is a ReadAheadSource whose DecodeRaw makes a message at the
// record's queue offset and counts its calls.
type decodeSrc struct {
	ReadAheadSource
	decoded int
}

func (d *decodeSrc) DecodeRaw(_ *message.Batch, _ []byte, r RawRecord) (*message.MessageExt, error) {
	d.decoded++
	return &message.MessageExt{QueueOffset: r.QueueOffset}, nil
}
