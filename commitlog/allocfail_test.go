package commitlog

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// After the allocator fails to prepare the next segment it does not try
// again by itself: on a full disk an attempt in the background would hold
// the last free bytes while it lasts, failing the small writes (offsets,
// configs) that should still succeed. The next append that needs the
// segment asks again and waits for the answer, so it succeeds as soon as
// there is room.
func TestAllocatorRetriesOnlyWhenAsked(t *testing.T) {
	f := vfs.NewFaulty(vfs.NewMem())
	var full atomic.Bool
	var attempts atomic.Int64
	f.SetInjector(func(op vfs.Op, path string) error {
		if op != vfs.OpAllocate {
			return nil
		}
		attempts.Add(1)
		if full.Load() {
			return syscall.ENOSPC
		}
		return nil
	})
	l, err := Open(Options{FS: f, Dir: "/cl", SegmentSize: 4096, NoWarm: true, RecoverFrom: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := &benchAppender{body: make([]byte, 1000)}
	// The first roll takes the segment prepared at Open; the disk fills
	// before the allocator prepares the one after it.
	for l.WrotePosition() < 4096 {
		if _, err := l.Append(a); err != nil {
			t.Fatal(err)
		}
	}
	full.Store(true)
	var appendErr error
	for range 10 {
		if _, appendErr = l.Append(a); appendErr != nil {
			break
		}
	}
	if !errors.Is(appendErr, ErrDiskFull) {
		t.Fatalf("append on a full disk: %v, want ErrDiskFull", appendErr)
	}
	l.mu.Lock()
	idle, asked := l.mu.allocIdle, len(l.allocReq)
	l.mu.Unlock()
	if !idle || asked != 0 {
		t.Fatalf("after the failure the allocator was asked again (idle %t, %d requests queued)", idle, asked)
	}
	before := attempts.Load()
	full.Store(false)
	if _, err := l.Append(a); err != nil {
		t.Fatalf("the first append once there is room: %v", err)
	}
	if got := attempts.Load() - before; got < 1 {
		t.Fatalf("the append did not ask the allocator (%d attempts)", got)
	}
}
