package mqlite

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// treeState describes every entry under dir (name, mode, size, mtime and
// a hash of the contents), to show that nothing changed.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[strings.TrimPrefix(p, dir)] = desc
		return nil
	}))
	return out
}

func countMqliteGoroutines() int {
	n := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, "github.com/mqlite/mqlite") && !strings.Contains(g, "testing.tRunner") {
			n++
		}
	}
	return n
}

// roFixture writes a store with two topics (keys, tags), a consumer group
// with a committed offset, a pending transaction and a delayed message,
// and returns the IDs of the plain messages.
func roFixture(t *testing.T, s *Store) []PutResult {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 2}))
	var res []PutResult
	for i := range 40 {
		r, err := s.Put(ctx, &Message{Topic: "orders", Tags: "t", Keys: []string{fmt.Sprintf("k%d", i%5)}, Body: body(i)}, i%2)
		require.NoError(t, err)
		res = append(res, r)
	}
	r, err := s.Put(ctx, &Message{Topic: "audit", Body: []byte("one")}, 0)
	require.NoError(t, err)
	res = append(res, r)
	_, err = s.Put(ctx, &Message{Topic: "orders", DelayLevel: 18, Body: []byte("later")}, 0)
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return TxUnknown }, TransactionOptions{})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "orders", Body: []byte("half")}, func(context.Context, *Message) TxState { return TxUnknown })
	require.NoError(t, err)
	require.NoError(t, tp.Close())
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("billing", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("orders", nil, 0))
	pollCommit(t, pc, "orders", 5)
	require.NoError(t, pc.Close())
	return res
}

// checkReadOnlyRefusals calls every method that writes.
func checkReadOnlyRefusals(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = s.PutBatch(ctx, []*Message{{Topic: "orders", Body: []byte("x")}}, 0)
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = s.NewProducer(ProducerOptions{})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = s.NewPushConsumer("g", ConsumerOptions{})
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = s.NewPullConsumer("g", ConsumerOptions{Model: Broadcasting})
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, s.CreateTopic("new", TopicConfig{Queues: 1}), ErrReadOnly)
	require.ErrorIs(t, s.UpdateTopic("orders", TopicConfig{Queues: 3}), ErrReadOnly)
	require.ErrorIs(t, s.DeleteTopic("orders"), ErrReadOnly)
	_, err = s.CleanExpired()
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, s.CheckTransactions(ctx), ErrReadOnly)
	require.ErrorIs(t, s.SendBack(ctx, "billing", &MessageExt{}), ErrReadOnly)
	_, err = s.Redrive(ctx, "billing", "0000000000000000")
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, s.WaitVisible(ctx), "nothing to wait for")
}

// A read-only Store of a closed store answers every query as the store
// did, refuses every write with ErrReadOnly, starts no goroutine, and
// leaves every file as it was (names, sizes, times, contents).
func TestReadOnlyOfClosedStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o := Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 16, IndexSlots: 64, IndexEntries: 128}
	w, err := Open(dir, &o)
	require.NoError(t, err)
	res := roFixture(t, w)
	wantStats, err := w.Stats()
	require.NoError(t, err)
	wantLag, err := w.ConsumerLag("billing")
	require.NoError(t, err)
	wantVerify, err := w.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	before := treeState(t, dir)
	baseline := mqliteGoroutines()

	s, err := Open(dir, &Options{ReadOnly: true, ConsumeQueueEntries: 16, IndexSlots: 64, IndexEntries: 128})
	require.NoError(t, err)
	require.True(t, s.ReadOnly())
	require.Equal(t, baseline, mqliteGoroutines(), "a read-only Store runs no goroutine")
	rep := s.Recovery()
	require.True(t, rep.CleanShutdown)
	require.Equal(t, wantStats.CommitLog.WrotePosition, rep.CommitLogEnd)

	for _, r := range res {
		m, err := s.MessageByID(r.MsgID())
		require.NoError(t, err)
		require.Equal(t, r.QueueOffset, m.QueueOffset)
	}
	n := 0
	for m, err := range s.Messages("orders", 1, 0) {
		require.NoError(t, err)
		require.Equal(t, body(2*n+1), m.Body)
		n++
	}
	require.Equal(t, 20, n)
	hits, err := s.MessagesByKey("orders", "k3", time.Unix(0, 0), time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, hits, 8)
	off, err := s.OffsetForTime("orders", 0, time.Unix(0, 0))
	require.NoError(t, err)
	require.Zero(t, off)
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, wantStats.Topics, st.Topics)
	require.Equal(t, wantStats.Groups, st.Groups)
	require.Equal(t, wantStats.CommitLog.WrotePosition, st.CommitLog.DispatchedPosition)
	require.Equal(t, 1, st.PendingTransactions, "counted from the half queue")
	lag, err := s.ConsumerLag("billing")
	require.NoError(t, err)
	require.Equal(t, wantLag, lag)
	vr, err := s.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, vr.OK, "%v", vr.Problems)
	require.Equal(t, wantVerify, vr)
	checkReadOnlyRefusals(t, s)
	_, err = RebuildIndexes(dir, &Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrReadOnly)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.MessageByID(res[0].MsgID())
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, before, treeState(t, dir), "the read-only Store changed the directory")

	_, err = Open(filepath.Join(t.TempDir(), "none"), &Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = Open(dir, &Options{ReadOnly: true, InMemory: true})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Open(dir, &Options{ReadOnly: true, SegmentSize: 32 << 10})
	require.ErrorIs(t, err, ErrInvalidArgument, "the recorded segment size wins")
}

// Beside an owner in this process (which holds the lock): a read-only
// Store opens, sees what was stored before, not what comes after; a
// reader blocked at the end of a queue is released by Close.
func TestReadOnlyBesideOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o := Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 16}
	w, err := Open(dir, &o)
	require.NoError(t, err)
	defer w.Close()
	res := roFixture(t, w)
	_, err = Open(dir, &o)
	require.ErrorIs(t, err, ErrLocked)

	s, err := Open(dir, &Options{ReadOnly: true, ConsumeQueueEntries: 16})
	require.NoError(t, err)
	require.False(t, s.Recovery().CleanShutdown, "the owner is running")
	later, err := w.Put(context.Background(), &Message{Topic: "orders", Body: []byte("later")}, 1)
	require.NoError(t, err)
	require.NoError(t, w.WaitVisible(context.Background()))
	_, err = s.MessageByID(later.MsgID())
	require.ErrorIs(t, err, ErrNotFound, "a view as of Open")
	max, err := s.MaxOffset("orders", 1)
	require.NoError(t, err)
	require.EqualValues(t, 20, max)
	m, err := s.MessageByID(res[39].MsgID())
	require.NoError(t, err)
	require.Equal(t, body(39), m.Body)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = s.ReadQueue(ctx, "orders", 1, 20, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing arrives in a read-only Store")
	blocked := make(chan error, 1)
	go func() {
		_, err := s.ReadQueue(context.Background(), "orders", 1, 20, 1)
		blocked <- err
	}()
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-blocked, ErrClosed)
}

// The in-memory and fault-injecting file systems work under a read-only
// Store too: no operation that changes anything reaches them.
func TestReadOnlyOnFaultyFS(t *testing.T) {
	mem := vfs.NewMem()
	o := Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 16, IndexSlots: 64, IndexEntries: 128}
	w, err := openFS(mem, "/ro", &o)
	require.NoError(t, err)
	res := roFixture(t, w)
	require.NoError(t, w.Close())
	ffs := vfs.NewFaulty(mem)
	var changes []string
	ffs.SetInjector(func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpRead, vfs.OpOpen, vfs.OpMap:
			return nil
		}
		changes = append(changes, fmt.Sprintf("%d %s", op, path))
		return fmt.Errorf("injected: %w", ErrIO)
	})
	o.ReadOnly, o.SegmentSize = true, 0
	s, err := openFS(ffs, "/ro", &o)
	require.NoError(t, err)
	m, err := s.MessageByID(res[7].MsgID())
	require.NoError(t, err)
	require.Equal(t, body(7), m.Body)
	checkReadOnlyRefusals(t, s)
	require.NoError(t, s.Close())
	require.Empty(t, changes)
}

// A record in the CommitLog that the owner has not dispatched yet (here a
// FlushSync send whose sync is stalled) is readable by offset and ID in a
// read-only Store, but not in its queue: the queues are the owner's.
func TestReadOnlyUndispatchedTail(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	o := Options{Flush: FlushSync, SegmentSize: 16 << 10, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 128,
		SyncFlushTimeout: time.Hour, FlowControlThreshold: -1}
	w, err := openFS(ffs, "/tail", &o)
	require.NoError(t, err)
	defer w.Close()
	ctx := context.Background()
	_, err = w.Put(ctx, &Message{Topic: "t", Body: []byte("visible")}, 0)
	require.NoError(t, err)
	require.NoError(t, w.WaitVisible(ctx))
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpMapSync && strings.Contains(path, "commitlog") {
			once.Do(func() {
				close(stuck)
				<-release
			})
		}
		return nil
	})
	putDone := make(chan error, 1)
	go func() {
		_, err := w.Put(ctx, &Message{Topic: "t", Body: []byte("not dispatched")}, 0)
		putDone <- err
	}()
	<-stuck

	ro := o
	ro.ReadOnly, ro.SegmentSize = true, 0
	s, err := openFS(mem, "/tail", &ro)
	require.NoError(t, err)
	st, err := s.Stats()
	require.NoError(t, err)
	require.Greater(t, st.CommitLog.WrotePosition, st.CommitLog.DispatchedPosition)
	m, err := s.ReadAt(st.CommitLog.DispatchedPosition)
	require.NoError(t, err)
	require.Equal(t, "not dispatched", string(m.Body))
	byID, err := s.MessageByID(m.MsgID)
	require.NoError(t, err)
	require.Equal(t, m.Body, byID.Body)
	max, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, max, "only the dispatched message is in the queue")
	n := 0
	for range s.Messages("t", 0, 0) {
		n++
	}
	require.Equal(t, 1, n)
	require.NoError(t, s.Close())
	close(release)
	require.NoError(t, <-putDone)
}
