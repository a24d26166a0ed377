package mqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

func TestDedupSecondSendReturnsTheFirst(t *testing.T) {
	ctx := context.Background()
	s := dedupStore(t, vfs.NewMem(), clock.NewFake(t0), nil)
	first, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("a"), DedupID: "order-1", Keys: []string{"k"}}, 1)
	require.NoError(t, err)
	require.False(t, first.Duplicate)

	again, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("other body"), DedupID: "order-1"}, 2)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Offset, again.Offset)
	require.Equal(t, first.Size, again.Size)
	require.Equal(t, first.QueueID, again.QueueID)
	require.Equal(t, first.QueueOffset, again.QueueOffset)
	require.Equal(t, first.MsgID(), again.MsgID())
	require.Equal(t, first.UniqKey(), again.UniqKey())
	require.True(t, first.StoreTime.Equal(again.StoreTime))

	// Another topic, another ID and no ID at all are stored.
	other, err := s.Put(ctx, &Message{Topic: "u", Body: []byte("a"), DedupID: "order-1"}, 0)
	require.NoError(t, err)
	require.False(t, other.Duplicate)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("b"), DedupID: "order-2"}, 1)
	require.NoError(t, err)
	for range 2 {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("c")}, 1)
		require.NoError(t, err)
		require.False(t, r.Duplicate)
	}
	require.Equal(t, map[string]int{"order-1": 1, "order-2": 1, "": 2}, queueIDs(t, s, "t"))
	got, err := s.MessageByID(first.MsgID())
	require.NoError(t, err)
	require.Equal(t, "order-1", got.DedupID, "the ID is stored with the message")
	st := dedupOf(t, s)
	require.Equal(t, int64(1), st.Duplicates)
	require.Equal(t, 3, st.IDs)
}

func TestDedupProducerAndBatches(t *testing.T) {
	ctx := context.Background()
	s := dedupStore(t, vfs.NewMem(), clock.NewFake(t0), nil)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	r1, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("1"), DedupID: "a"})
	require.NoError(t, err)
	r2, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("1"), DedupID: "a"})
	require.NoError(t, err)
	require.True(t, r2.Duplicate)
	require.Equal(t, r1.Offset, r2.Offset)
	require.Equal(t, SendOK, r2.Status)

	// a repeats a stored ID, b is new, b again repeats b within the batch.
	batch := []*Message{
		{Topic: "t", Body: []byte("2"), DedupID: "a"},
		{Topic: "t", Body: []byte("3"), DedupID: "b"},
		{Topic: "t", Body: []byte("4")},
		{Topic: "t", Body: []byte("5"), DedupID: "b"},
	}
	rs, err := s.PutBatch(ctx, batch, 0)
	require.NoError(t, err)
	require.Len(t, rs, 4)
	require.Equal(t, []bool{true, false, false, true}, []bool{rs[0].Duplicate, rs[1].Duplicate, rs[2].Duplicate, rs[3].Duplicate})
	require.Equal(t, r1.Offset, rs[0].Offset)
	require.Equal(t, rs[1].Offset, rs[3].Offset)
	require.Equal(t, rs[1].QueueOffset+1, rs[2].QueueOffset, "the stored ones are one batch")

	// Every message of a batch a duplicate: nothing stored.
	sr, err := p.SendBatch(ctx, []*Message{{Topic: "t", Body: []byte("6"), DedupID: "a"}, {Topic: "t", Body: []byte("7"), DedupID: "b"}})
	require.NoError(t, err)
	require.True(t, sr[0].Duplicate && sr[1].Duplicate)
	require.Equal(t, map[string]int{"a": 1, "b": 1, "": 1}, queueIDs(t, s, "t"))
}

func TestDedupConcurrentSendsStoreOnce(t *testing.T) {
	ctx := context.Background()
	for _, flush := range []FlushMode{FlushAsync, FlushSync} {
		s := dedupStore(t, vfs.NewMem(), clock.Real, &Options{Flush: flush})
		const senders, ids = 8, 50
		offs := make([][]int64, senders)
		var wg sync.WaitGroup
		for g := range senders {
			wg.Go(func() {
				for i := range ids {
					m := &Message{Topic: "t", Body: []byte{byte(g)}, DedupID: fmt.Sprint("id-", i)}
					var r PutResult
					var err error
					if g%2 == 0 {
						r, err = s.Put(ctx, m, i%4)
					} else {
						var rs []PutResult
						rs, err = s.PutBatch(ctx, []*Message{m}, i%4)
						if err == nil {
							r = rs[0]
						}
					}
					if err != nil {
						t.Error(err)
						return
					}
					offs[g] = append(offs[g], r.Offset)
				}
			})
		}
		wg.Wait()
		for g := 1; g < senders; g++ {
			require.Equal(t, offs[0], offs[g], "every sender got the stored message's offset")
		}
		got := queueIDs(t, s, "t")
		require.Len(t, got, ids)
		for id, n := range got {
			require.Equal(t, 1, n, id)
		}
		require.Equal(t, int64((senders-1)*ids), dedupOf(t, s).Duplicates)
	}
}

func TestDedupWindowAndCountBound(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s := dedupStore(t, vfs.NewMem(), clk, &Options{DedupWindow: time.Minute, DedupMaxIDs: 3})
	put := func(id string) PutResult {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte(id), DedupID: id}, 0)
		require.NoError(t, err)
		return r
	}
	put("a")
	clk.Advance(59 * time.Second)
	require.True(t, put("a").Duplicate, "inside the window")
	clk.Advance(2 * time.Second)
	require.False(t, put("a").Duplicate, "the window ended: stored again, as documented")

	put("b")
	put("c")
	put("d") // a (second copy), b, c, d: a is evicted by the count bound
	require.Equal(t, int64(1), dedupOf(t, s).Evicted)
	require.False(t, put("a").Duplicate, "evicted early")
	require.True(t, put("d").Duplicate)
	require.Equal(t, 3, dedupOf(t, s).IDs)

	// Off: every send stores.
	s2, err := openFS(vfs.NewMem(), "/s2", smallFiles(&Options{DedupWindow: -1}))
	require.NoError(t, err)
	defer s2.Close()
	for range 2 {
		r, err := s2.Put(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "x"}, 0)
		require.NoError(t, err)
		require.False(t, r.Duplicate)
	}
}

func TestDedupWindowSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	clk := clock.NewFake(t0)
	o := func() *Options { return &Options{DedupWindow: time.Minute, SegmentSize: 8 << 10} }
	s := dedupStore(t, fs, clk, o())
	var first []PutResult
	for i := range 200 { // several segments
		r, err := s.Put(ctx, &Message{Topic: "t", Body: make([]byte, 100), DedupID: fmt.Sprint(i)}, i%2)
		require.NoError(t, err)
		first = append(first, r)
		if i == 99 {
			clk.Advance(40 * time.Second)
		}
	}
	require.NoError(t, s.Close())

	clk.Advance(30 * time.Second) // the first hundred are 70 s old, the rest 30 s
	s = dedupStore(t, fs, clk, o())
	require.Equal(t, 100, dedupOf(t, s).IDs)
	for i := range 200 {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: make([]byte, 100), DedupID: fmt.Sprint(i)}, i%2)
		require.NoError(t, err)
		if i < 100 {
			require.False(t, r.Duplicate, "%d is older than the window", i)
		} else {
			require.True(t, r.Duplicate, "%d", i)
			require.Equal(t, first[i].Offset, r.Offset)
			require.Equal(t, first[i].QueueOffset, r.QueueOffset)
		}
	}
}

func TestDedupDelayedMessages(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	clk := clock.NewFake(t0)
	o := func() *Options { return &Options{DelayLevels: []time.Duration{time.Second}} }
	s := dedupStore(t, fs, clk, o())
	d1, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("later"), DedupID: "d", DelayLevel: 1}, 3)
	require.NoError(t, err)
	require.True(t, d1.Delayed)
	d2, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("later"), DedupID: "d"}, 0)
	require.NoError(t, err)
	require.True(t, d2.Duplicate && d2.Delayed, "the waiting copy is the first send")
	require.Equal(t, d1.Offset, d2.Offset)
	require.Equal(t, 3, d2.QueueID)
	require.Equal(t, int64(-1), d2.QueueOffset)

	clk.Advance(time.Second)
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, map[string]int{"d": 1}, queueIDs(t, s, "t"), "delivered once: the delivery is not a duplicate")
	d3, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("later"), DedupID: "d"}, 0)
	require.NoError(t, err)
	require.True(t, d3.Duplicate)
	require.Equal(t, d1.Offset, d3.Offset)

	require.NoError(t, s.Close())
	s = dedupStore(t, fs, clk, o())
	d4, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("later"), DedupID: "d"}, 0)
	require.NoError(t, err)
	require.True(t, d4.Duplicate)
	require.Equal(t, d1.Offset, d4.Offset, "the rebuilt window names the first send too")
	require.Equal(t, map[string]int{"d": 1}, queueIDs(t, s, "t"))
}

func TestDedupTransactions(t *testing.T) {
	ctx := context.Background()
	s := dedupStore(t, vfs.NewMem(), clock.NewFake(t0), nil)
	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{Group: "g"})
	require.NoError(t, err)
	runs := 0
	commit := func(context.Context, *Message) TxState { runs++; return CommitMessage }
	rollback := func(context.Context, *Message) TxState { runs++; return RollbackMessage }

	// A rolled-back half does not count.
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "tx"}, rollback)
	require.NoError(t, err)
	c1, err := tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "tx"}, commit)
	require.NoError(t, err)
	require.False(t, c1.Duplicate)
	require.Equal(t, 2, runs)

	// Committed: a plain send and another transaction are duplicates; the
	// local transaction does not run again.
	p, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "tx"}, 0)
	require.NoError(t, err)
	require.True(t, p.Duplicate)
	require.Equal(t, c1.Offset, p.Offset)
	c2, err := tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "tx"}, commit)
	require.NoError(t, err)
	require.True(t, c2.Duplicate)
	require.Equal(t, c1.Offset, c2.Offset)
	require.Equal(t, c1.TransactionID, c2.TransactionID)
	require.Equal(t, 2, runs)

	// A plain send first: a transaction with its ID is a duplicate.
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("y"), DedupID: "plain"}, 0)
	require.NoError(t, err)
	c3, err := tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("y"), DedupID: "plain"}, commit)
	require.NoError(t, err)
	require.True(t, c3.Duplicate)
	require.Equal(t, 2, runs)
	require.Equal(t, map[string]int{"tx": 1, "plain": 1}, queueIDs(t, s, "t"))
}

func TestDedupBadInput(t *testing.T) {
	ctx := context.Background()
	s := dedupStore(t, vfs.NewMem(), clock.NewFake(t0), nil)
	_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "a\x01b"}, 0)
	require.ErrorIs(t, err, ErrInvalidKey)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{message.PropDedupID: "a"}}, 0)
	require.ErrorIs(t, err, ErrInvalidProperty)
	_, err = s.PutBatch(ctx, []*Message{{Topic: "t", Body: []byte("x"), DedupID: "a"}, nil}, 0)
	require.Error(t, err)
	require.Equal(t, 0, dedupOf(t, s).IDs, "a failed send remembers nothing")
	r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "a"}, 0)
	require.NoError(t, err)
	require.False(t, r.Duplicate, "the failed batch stored nothing")

	_, err = openFS(vfs.NewMem(), "/bad", &Options{DedupMaxIDs: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Put(cctx, &Message{Topic: "t", Body: []byte("x"), DedupID: "z"}, 0)
	require.True(t, errors.Is(err, context.Canceled))
	require.Equal(t, map[string]int{"a": 1}, queueIDs(t, s, "t"))
}

// A send whose append fails after its ID was checked stores nothing and
// remembers nothing: a send of the same ID waiting for it, or coming
// after, stores it.
func TestDedupFailedAppendReleasesTheID(t *testing.T) {
	ctx := context.Background()
	ffs := vfs.NewFaulty(vfs.NewMem())
	s := dedupStore(t, ffs, clock.NewFake(t0), &Options{SegmentSize: 64 << 10})
	body := make([]byte, 1000)
	var fails int
	for i := 0; fails == 0 && i < 1000; i++ {
		// Fail every new CommitLog segment: the append that needs one fails.
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if (op == vfs.OpOpen || op == vfs.OpAllocate || op == vfs.OpTruncate) && strings.Contains(path, "commitlog") {
				return errors.New("injected")
			}
			return nil
		})
		id := fmt.Sprintf("id-%d", i)
		_, err := s.Put(ctx, &Message{Topic: "t", Body: body, DedupID: id}, 0)
		ffs.SetInjector(nil)
		if err == nil {
			continue
		}
		fails++
		require.Equal(t, 0, queueIDs(t, s, "t")[id], "the failed send stored nothing")
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a claim left behind: the send waits for it
		r, err := s.Put(wctx, &Message{Topic: "t", Body: body, DedupID: id}, 0)
		cancel()
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded, "the failed send's claim was left behind")
			t.Skipf("the store stays failed after an append error (%v): nothing more to check", err)
		}
		require.False(t, r.Duplicate, "the failed send was not remembered")
		again, err := s.Put(ctx, &Message{Topic: "t", Body: body, DedupID: id}, 0)
		require.NoError(t, err)
		require.True(t, again.Duplicate)
		require.Equal(t, r.Offset, again.Offset)
	}
	require.Equal(t, 1, fails, "a segment switch failed one append")
}
