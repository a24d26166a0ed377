//go:build linux

package mqlite

// S24: file descriptors and mappings. A store of 500 segments and 200
// queues opens under RLIMIT_NOFILE = 64 (segments and queue files close
// their descriptor once mapped); at the very edge of the limit Open either
// works or fails with EMFILE, leaving nothing behind; an injected ENOMEM
// at any mmap fails Open cleanly.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mqlite/mqlite/vfs"
)

const (
	fdSegments = 500
	fdQueues   = 200
)

func fdOptions() *Options {
	return &Options{SegmentSize: 4096, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 4096, NoWarm: true}
}

// buildManySegments writes a store of fdSegments segments whose records
// are spread over fdQueues queues.
func buildManySegments(t *testing.T, dir string) {
	t.Helper()
	s, err := Open(dir, fdOptions())
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("fd", TopicConfig{Queues: fdQueues}))
	ctx := context.Background()
	for i := 0; len(s.log.Segments()) < fdSegments; i++ {
		_, err := s.Put(ctx, &Message{Topic: "fd", Body: make([]byte, 1200)}, i%fdQueues)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
}

func setNoFile(t *testing.T, cur uint64) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		childFail(t, "getrlimit: %v", err)
	}
	lim.Cur = cur
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		childFail(t, "setrlimit: %v", err)
	}
}

// lowestFreeFD is the descriptor the next open would get.
func lowestFreeFD(t *testing.T) uint64 {
	fd, err := unix.Dup(2)
	if err != nil {
		childFail(t, "dup: %v", err)
	}
	unix.Close(fd)
	return uint64(fd)
}

// TestChildFDLimit opens the big store under RLIMIT_NOFILE = 64, uses it
// hard, then opens it with the limit a few descriptors above those in use.
func TestChildFDLimit(t *testing.T) {
	dir := childDir(t, "TestChildFDLimit")
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		childFail(t, "getrlimit: %v", err)
	}
	baseFDs, baseG := openFDs(t), mqliteGoroutines()
	left := func(what string) {
		if n := openFDs(t) - baseFDs; n != 0 {
			childFail(t, "%s: %d descriptors left", what, n)
		}
		if n := mappingsUnder(t, dir); n != 0 {
			childFail(t, "%s: %d mappings left", what, n)
		}
		if n := mqliteGoroutines() - baseG; n > 0 {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			childFail(t, "%s: %d goroutines left: %q", what, n, buf)
		}
	}

	setNoFile(t, 64)
	s, err := Open(dir, fdOptions())
	if err != nil {
		childFail(t, "open under 64 descriptors (EMFILE: %t): %v", errors.Is(err, syscall.EMFILE), err)
	}
	emit("open %d %d %d", settledFDs(t, baseFDs, 1), len(s.log.Segments()), len(s.disp.cq.Queues()))
	read := 0
	for q := range fdQueues {
		for _, err := range s.Messages("fd", q, 0) {
			if err != nil {
				childFail(t, "read queue %d: %v", q, err)
			}
			read++
		}
	}
	ctx := context.Background()
	for i := range 300 { // 100 more segments
		if _, err := s.Put(ctx, &Message{Topic: "fd", Body: make([]byte, 1200)}, i%fdQueues); err != nil {
			childFail(t, "put under 64 descriptors: %v", err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		childFail(t, "wait: %v", err)
	}
	rep, err := s.Verify(ctx, nil)
	if err != nil || !rep.OK {
		childFail(t, "verify: %v %v", err, rep.Problems)
	}
	emit("used %d %d %d", openFDs(t)-baseFDs, len(s.log.Segments()), read)
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
	left("after Close")

	for k := range uint64(4) {
		setNoFile(t, lowestFreeFD(t)+k) // room for k more descriptors
		s, err := Open(dir, fdOptions())
		setNoFile(t, old.Cur)
		if err != nil && !errors.Is(err, syscall.EMFILE) {
			childFail(t, "open with %d descriptors to spare: %v", k, err)
		}
		if err == nil {
			if err := s.Close(); err != nil {
				childFail(t, "close: %v", err)
			}
		}
		left(fmt.Sprintf("open with %d descriptors to spare", k))
		emit("edge %d %t", k, err == nil)
	}
	s, err = Open(dir, fdOptions())
	if err != nil {
		childFail(t, "open once the limit is raised: %v", err)
	}
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
	emit("done")
}

// settledFDs is the number of descriptors open beyond base once it is at
// most want, or after 10 s. Open hands the allocator the next segment to
// prepare, which holds the new file's descriptor (and the directory's,
// to sync it) for a moment: counted then, the store's one descriptor
// looked like two. A store that keeps more open fails after the wait.
func settledFDs(t *testing.T, base, want int) int {
	n := openFDs(t) - base
	for deadline := time.Now().Add(10 * time.Second); n > want && time.Now().Before(deadline); n = openFDs(t) - base {
		runtime.Gosched()
	}
	return n
}

// S24: see the top of the file.
func TestFDExhaustion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	buildManySegments(t, dir)
	c, err := startChild(t, "TestChildFDLimit", dir, nil)
	require.NoError(t, err)
	f := c.expect("open")
	t.Logf("S24: under RLIMIT_NOFILE 64, an open store of %s segments and %s queues holds %s descriptors (the lock file)", f[1], f[2], f[0])
	require.Equal(t, "1", f[0], "one descriptor: the lock")
	f = c.expect("used")
	t.Logf("S24: after reading %s messages and rolling to %s segments: %s descriptors", f[2], f[1], f[0])
	for k := range 4 {
		f = c.expect("edge")
		require.Equal(t, strconv.Itoa(k), f[0])
		t.Logf("S24: %d descriptors to spare: open ok=%s, nothing left behind", k, f[1])
	}
	c.expect("done")
	c.wait()

	// ENOMEM injected at the k-th mapping fails Open with an error that
	// wraps it, leaving no mapping and no goroutine; past the mappings
	// Open needs, it succeeds.
	for _, k := range []int{1, 350, 700, 701, 800, 100_000} {
		ffs := vfs.NewFaulty(vfs.OS)
		var maps atomic.Int64 // the allocator maps concurrently
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpMap && maps.Add(1) == int64(k) {
				return syscall.ENOMEM
			}
			return nil
		})
		s, err := openFS(ffs, dir, fdOptions())
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOMEM, "mapping %d", k)
		} else {
			require.NoError(t, s.Close())
		}
		require.Zero(t, mappingsUnder(t, dir), "mapping %d", k)
		require.Zero(t, mqliteGoroutines(), "mapping %d", k)
		t.Logf("ENOMEM at mapping %d of %d: open ok=%t", k, maps.Load(), err == nil)
	}
}
