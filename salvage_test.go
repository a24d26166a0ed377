package mqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/topic"
)

// TestSalvage damages a store in three places (a payload byte of a record
// in the middle of sealed segment 0, the magic of a record in sealed
// segment 1, and the last record, a torn tail), salvages it, and checks
// that the new store opens, verifies OK and holds exactly the good
// messages in their queues, in order, that the report names each damaged
// range by file and offset, and that the group's committed offsets are
// translated.
func TestSalvage(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	opts := &Options{SegmentSize: 64 << 10, NoWarm: true}
	s, err := Open(src, opts)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 3}))
	ctx := context.Background()
	var rs []PutResult
	for i := range 600 {
		r, err := s.Put(ctx, &Message{Topic: "t", Tags: "x", Keys: []string{fmt.Sprintf("k%d", i)},
			Body: []byte(fmt.Sprintf("body-%03d-%0200d", i, i))}, i%3)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("t", nil))
	require.NoError(t, pc.Close())
	require.NoError(t, s.SetConsumerOffset("g", "t", 0, 100)) // past the damaged records of queue 0
	require.NoError(t, s.SetConsumerOffset("g", "t", 1, 3))
	require.NoError(t, s.Close())

	const seg = 64 << 10
	a, b, last := rs[30], rs[0], rs[599]
	for i, r := range rs {
		if r.Offset >= seg && r.Offset < seg+seg/2 {
			b = rs[i]
			break
		}
	}
	require.Less(t, last.Offset, int64(4*seg))
	require.GreaterOrEqual(t, last.Offset, int64(3*seg), "the last record in segment 3")
	flipLogBit(t, src, a.Offset+28+60, 2) // checksum mismatch
	flipLogBit(t, src, b.Offset+5, 1)     // bad magic
	flipLogBit(t, src, last.Offset+100, 0)

	rep, err := Salvage(ctx, src, dst, opts)
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.EqualValues(t, 597, rep.Copied)
	require.Len(t, rep.Dropped, 3, "%v", rep.Dropped)
	bi := (b.QueueOffset)*3 + int64(b.QueueID) // b's index in rs
	require.Equal(t, rs[bi].Offset, b.Offset)
	for i, want := range []struct {
		r    PutResult
		next int64
	}{{a, rs[31].Offset}, {b, rs[bi+1].Offset}, {last, last.Offset + int64(last.Size)}} {
		d := rep.Dropped[i]
		require.Equal(t, want.r.Offset, d.From, "range %d", i)
		require.Equal(t, want.next, d.To, "range %d", i)
		require.Equal(t, filepath.Join(src, "commitlog", fmt.Sprintf("%020d", d.From/seg*seg)), d.Path, "range %d", i)
		require.Equal(t, d.From%seg, d.Pos, "range %d", i)
	}
	require.Contains(t, rep.Dropped[0].Reason, "checksum")
	require.Contains(t, rep.Dropped[1].Reason, "magic")
	require.Contains(t, rep.Dropped[2].String(), "torn tail")

	n, err := Open(dst, opts)
	require.NoError(t, err)
	defer n.Close()
	v, err := n.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, v.OK, "%q", v.Problems)
	require.EqualValues(t, 597, v.Records)
	dropped := map[int]bool{30: true, int(bi): true, 599: true}
	for q := range 3 {
		var want []string
		for i := q; i < 600; i += 3 {
			if !dropped[i] {
				want = append(want, fmt.Sprintf("body-%03d-%0200d", i, i))
			}
		}
		var got []string
		for m, err := range n.Messages("t", q, 0) {
			require.NoError(t, err)
			got = append(got, string(m.Body))
			require.Equal(t, "x", m.Tags)
		}
		require.Equal(t, want, got, "queue %d", q)
	}
	ms, err := n.MessagesByKey("t", "k1", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 4)
	require.NoError(t, err)
	require.Len(t, ms, 1)

	offs, err := n.ConsumerOffsets("g")
	require.NoError(t, err)
	got := map[int]int64{}
	for _, o := range offs {
		got[o.ID] = o.Offset
	}
	// Queue 0 lost rs[30] (offset 10) below the committed 100; queue 1
	// lost nothing below 3.
	want := map[int]int64{0: 99, 1: 3}
	if b.QueueID == 0 && b.QueueOffset < 100 {
		want[0] = 98
	}
	if b.QueueID == 1 && b.QueueOffset < 3 {
		want[1] = 2
	}
	require.Equal(t, want[0], got[0])
	require.Equal(t, want[1], got[1])
}

// TestSalvageDelayed: a delayed message already delivered is copied once
// (its delivery), one still waiting is stored delayed again and delivered
// once when due; transaction records are not copied, and the report
// counts what it skipped.
func TestSalvageDelayed(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	clk := clock.NewFake(t0)
	opts := &Options{SegmentSize: 64 << 10, NoWarm: true, Clock: clk}
	s, err := Open(src, opts)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 2}))
	ctx := context.Background()
	_, err = s.Put(ctx, &Message{Topic: "d", DelayLevel: 1, Body: []byte("soon")}, 1)
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "d", DelayLevel: 18, Body: []byte("later")}, 1)
	require.NoError(t, err)
	clk.Advance(time.Second)
	require.Equal(t, "soon", string(readN(t, s, "d", 1, 1)[0].Body))
	require.NoError(t, s.Close())

	rep, err := Salvage(ctx, src, dst, opts)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Dropped)
	require.EqualValues(t, 2, rep.Copied, "the delivery of soon, and later delayed again")
	require.Equal(t, map[string]int64{topic.Schedule: 1}, rep.Skipped)

	n, err := Open(dst, opts)
	require.NoError(t, err)
	defer n.Close()
	require.Equal(t, "soon", string(readN(t, n, "d", 1, 1)[0].Body))
	require.NoError(t, n.WaitVisible(ctx))
	max, err := n.MaxOffset("d", 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, max, "later waits")
	clk.Advance(2*time.Hour + time.Second)
	ms := readRange(t, n, "d", 1, 1, 2)
	require.Equal(t, "later", string(ms[0].Body))
	require.NoError(t, n.WaitVisible(ctx))
	max, err = n.MaxOffset("d", 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, max, "each once")
}
