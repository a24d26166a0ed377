//go:build linux

package mqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func liveOptions() *Options {
	return &Options{SegmentSize: 32 << 10, ConsumeQueueEntries: 256, IndexSlots: 256, IndexEntries: 1024}
}

func liveBody(i int) []byte { return []byte(fmt.Sprintf("live-%d-%0*d", i, i%200, 0)) }

// TestChildLiveWriter writes messages until it is killed and prints
// "ack id queue queueOffset i" for each, once it and the next batch are
// visible to readers (so it is not the newest dispatched record, whose
// keys a read-only Store may miss).
func TestChildLiveWriter(t *testing.T) {
	dir := childDir(t, "TestChildLiveWriter")
	s, err := Open(dir, liveOptions())
	if err != nil {
		childFail(t, "open: %v", err)
	}
	defer s.Close()
	emit("opened")
	ctx := context.Background()
	const batch = 20
	var pending []string
	for i := range 1_000_000 { // killed long before
		r, err := s.Put(ctx, &Message{Topic: "live", Keys: []string{"k" + strconv.Itoa(i)}, Body: liveBody(i)}, i%4)
		if err != nil {
			childFail(t, "put %d: %v", i, err)
		}
		pending = append(pending, fmt.Sprintf("ack %s %d %d %d", r.MsgID(), i%4, r.QueueOffset, i))
		if len(pending) == 2*batch {
			if err := s.WaitVisible(ctx); err != nil {
				childFail(t, "wait visible: %v", err)
			}
			for _, l := range pending[:batch] {
				emit("%s", l)
			}
			pending = slices.Delete(pending, 0, batch)
		}
	}
}

type liveAck struct {
	id    string
	queue int
	qoff  int64
	i     int
}

func parseLiveAck(t *testing.T, f []string) liveAck {
	t.Helper()
	require.Len(t, f, 4)
	q, err1 := strconv.Atoi(f[1])
	qoff, err2 := strconv.ParseInt(f[2], 10, 64)
	i, err3 := strconv.Atoi(f[3])
	require.NoError(t, errors.Join(err1, err2, err3))
	return liveAck{id: f[0], queue: q, qoff: qoff, i: i}
}

// checkLiveAcks finds every acknowledged message by ID, in its queue at
// its offset, and by key.
func checkLiveAcks(t *testing.T, s *Store, acks []liveAck, what string) {
	t.Helper()
	for _, a := range acks {
		m, err := s.MessageByID(a.id)
		require.NoError(t, err, "%s: message %d", what, a.i)
		require.Equal(t, liveBody(a.i), m.Body, what)
		found := false
		for q, err := range s.Messages("live", a.queue, a.qoff) {
			require.NoError(t, err, what)
			found = q.MsgID == a.id
			break
		}
		require.True(t, found, "%s: message %d not at %d@%d", what, a.i, a.queue, a.qoff)
		hits, err := s.MessagesByKey("live", "k"+strconv.Itoa(a.i), m.StoreTimestamp, m.StoreTimestamp, 4)
		require.NoError(t, err, what)
		require.Len(t, hits, 1, "%s: message %d by key", what, a.i)
	}
}

// A read-only Store opened (five times) beside a process that keeps
// writing sees every message that process had made visible, verifies
// clean, and refuses writes; after a kill -9 of the writer it still reads
// everything, and the writer's lock is gone.
func TestReadOnlyBesideWritingProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	c, err := startChild(t, "TestChildLiveWriter", dir, nil)
	require.NoError(t, err)
	c.expect("opened")
	var acks []liveAck
	collect := func(n int) {
		for len(acks) < n {
			acks = append(acks, parseLiveAck(t, c.expect("ack")))
		}
	}
	collect(200)
	_, err = Open(dir, liveOptions())
	require.ErrorIs(t, err, ErrLocked)
	ro := &Options{ReadOnly: true, ConsumeQueueEntries: 256}
	for round := range 5 {
		what := fmt.Sprintf("round %d (%d acks)", round, len(acks))
		s, err := Open(dir, ro)
		require.NoError(t, err, what)
		checkLiveAcks(t, s, acks, what)
		rep, err := s.Verify(context.Background(), nil)
		require.NoError(t, err, what)
		require.True(t, rep.OK, "%s: %v", what, rep.Problems)
		st, err := s.Stats()
		require.NoError(t, err)
		require.LessOrEqual(t, st.CommitLog.DispatchedPosition, st.CommitLog.WrotePosition)
		_, err = s.Put(context.Background(), &Message{Topic: "live", Body: []byte("x")}, 0)
		require.ErrorIs(t, err, ErrReadOnly, what)
		t.Logf("%s: %d records verified, dispatch lag %d bytes", what, rep.Records, st.CommitLog.DispatchLag)
		require.NoError(t, s.Close(), what)
		collect(len(acks) + 300)
	}
	for _, line := range c.kill() {
		if f := splitWord(line, "ack"); f != nil {
			acks = append(acks, parseLiveAck(t, f))
		}
	}

	s, err := Open(dir, ro)
	require.NoError(t, err)
	require.False(t, s.Recovery().CleanShutdown)
	checkLiveAcks(t, s, acks, "read-only after kill -9")
	require.NoError(t, s.Close())
	s, err = Open(dir, liveOptions())
	require.NoError(t, err, "the lock went with the killed process")
	checkLiveAcks(t, s, acks, "reopened after kill -9")
	require.NoError(t, s.Close())
	t.Logf("%d acknowledged messages read beside the writer", len(acks))
}

// splitWord returns the fields after word if line starts with it.
func splitWord(line, word string) []string {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != word {
		return nil
	}
	return f[1:]
}
