package mqlite

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// putBacklog puts n messages of about 1 KiB on p: a catch-up the sender reads
// from the segment files (more than readChunkMin behind).
func putBacklog(t *testing.T, p *Store, n int) {
	t.Helper()
	for i := range n {
		_, err := p.Put(context.Background(), &Message{Topic: "t", Keys: []string{string(body(i)[:14])},
			Body: bytes.Repeat(body(i), 4)}, i%3)
		require.NoError(t, err)
	}
	require.Greater(t, p.log.WrotePosition(), int64(readChunkMin))
}

// countReads counts the reads of the CommitLog's segment files on ffs,
// failing them with fail if it returns an error.
func countReads(ffs *vfs.Faulty, fail func(n int64) error) *atomic.Int64 {
	var n atomic.Int64
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op != vfs.OpRead || !strings.Contains(path, "commitlog") {
			return nil
		}
		return fail(n.Add(1))
	})
	return &n
}

// backlogPrimary opens a primary on a faulty in-memory file system holding
// a backlog of 300 messages (several segments), and returns it with that
// file system, a fresh one for a replica and the options both use.
func backlogPrimary(t *testing.T, extra Options) (*Store, *vfs.Faulty, *vfs.MemFS, *Options) {
	t.Helper()
	ffs := vfs.NewFaulty(vfs.NewMem())
	o := replOpts(clock.Real, extra)
	p, err := openFS(ffs, "/p", o)
	require.NoError(t, err)
	defer func() {
		if t.Failed() { // the backlog failed: the caller never gets p
			p.Close()
		}
	}()
	putBacklog(t, p, 300)
	return p, ffs, vfs.NewMem(), o
}

// TestReplicaCatchUpFromSegmentReads: a replica catching up a backlog
// larger than readChunkMin gets it from chunks the primary read from its
// segment files: the logs are byte-identical and every query answers the
// same.
func TestReplicaCatchUpFromSegmentReads(t *testing.T) {
	p, ffs, rfs, o := backlogPrimary(t, Options{})
	defer p.Close()
	reads := countReads(ffs, func(int64) error { return nil })
	r := openReplica(t, rfs, "/r", o)
	defer r.Close()
	stop := link(p, r, nil)
	end := caughtUp(t, p, r)
	stop()
	require.Positive(t, reads.Load(), "chunks read from the segment files")
	require.Greater(t, len(p.log.Segments()), 10)
	require.True(t, bytes.Equal(logBytes(t, ffs, p, end), logBytes(t, rfs, r, end)), "byte-identical CommitLogs")
	sameAnswers(t, p, r, nil)
}

// TestReplicaSegmentReadFailsTheSession: a segment file the sender cannot
// read ends the session with that error; nothing is lost on either side,
// and a new session catches the replica up.
func TestReplicaSegmentReadFailsTheSession(t *testing.T) {
	p, ffs, rfs, o := backlogPrimary(t, Options{})
	defer p.Close()
	boom := errors.New("boom")
	countReads(ffs, func(n int64) error {
		if n >= 3 {
			return boom
		}
		return nil
	})
	r := openReplica(t, rfs, "/r", o)
	defer r.Close()
	perr, rerr := linkEnd(p, r)
	require.ErrorIs(t, perr, boom)
	require.Error(t, rerr)
	got := r.log.WrotePosition()
	require.Positive(t, got, "the chunks read before the fault arrived")
	require.Less(t, got, p.log.WrotePosition())
	ffs.SetInjector(nil)
	stop := link(p, r, nil)
	end := caughtUp(t, p, r)
	stop()
	require.True(t, bytes.Equal(logBytes(t, ffs, p, end), logBytes(t, rfs, r, end)), "byte-identical CommitLogs")
	sameAnswers(t, p, r, nil)
}

// TestReplicaSegmentRemovedWhileSent: retention removes the segments a
// catch-up is reading in the middle of a read: the chunk being read goes
// out whole and right, then the session ends with ErrNotFound; what the
// replica holds is the primary's log as it was.
func TestReplicaSegmentRemovedWhileSent(t *testing.T) {
	p, ffs, rfs, o := backlogPrimary(t, Options{NoRecycle: true})
	defer p.Close()
	require.NoError(t, p.WaitVisible(context.Background()))
	before := logBytes(t, ffs, p, p.log.WrotePosition())
	cut := 4 * o.SegmentSize
	countReads(ffs, func(n int64) error {
		if n == 2 { // the second chunk, in the first segment
			_, err := p.log.DeleteBefore(cut)
			require.NoError(t, err)
		}
		return nil
	})
	r := openReplica(t, rfs, "/r", o)
	defer r.Close()
	perr, rerr := linkEnd(p, r)
	require.ErrorIs(t, perr, errs.ErrNotFound)
	require.Error(t, rerr)
	got := r.log.WrotePosition()
	require.Positive(t, got)
	require.LessOrEqual(t, got, cut)
	require.True(t, bytes.Equal(before[:got], logBytes(t, rfs, r, got)), "what arrived is the primary's")
}
