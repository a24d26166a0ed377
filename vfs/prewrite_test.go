package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// prewriteFile creates name of size bytes (preallocated, synced) with
// "old" at 0 and returns it open read-write.
func prewriteFile(t *testing.T, fsys FS, name string, size int64) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	return f
}

func readAt(t *testing.T, f File, off int64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// The OS and MemFS write zeros over the range and nothing else; a file
// opened O_RDONLY refuses.
func TestPrewriteZeros(t *testing.T) {
	for name, fsys := range map[string]FS{"os": OS, "mem": NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name == "mem" {
				dir = "/d"
				fsys.MkdirAll(dir, 0o700)
			}
			path := filepath.Join(dir, "f")
			f := prewriteFile(t, fsys, path, 3*zeroChunk)
			if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 3*zeroChunk-3), 3); err != nil {
				t.Fatal(err)
			}
			p, ok := f.(Prewriter)
			if !ok {
				t.Fatalf("%T is no Prewriter", f)
			}
			// Across a chunk boundary, unaligned.
			if err := p.Prewrite(5, 2*zeroChunk); err != nil {
				t.Fatal(err)
			}
			if err := p.SyncPrewrite(); err != nil {
				t.Fatal(err)
			}
			got := readAt(t, f, 0, 3*zeroChunk)
			want := append([]byte("old\x07\x07"), make([]byte, 2*zeroChunk)...)
			want = append(want, bytes.Repeat([]byte{7}, zeroChunk-5)...)
			if !bytes.Equal(got, want) {
				t.Fatal("the file after Prewrite(5, 2 chunks) is not old, 7 7, zeros, 7s")
			}
			ro, err := fsys.OpenFile(path, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if err := ro.(Prewriter).Prewrite(0, 10); err == nil {
				t.Fatal("Prewrite through a file opened O_RDONLY succeeded")
			}
			if !bytes.Equal(readAt(t, f, 0, 3), []byte("old")) {
				t.Fatal("a refused Prewrite changed the file")
			}
		})
	}
}

// Faulty asks for OpPrewrite and OpPrewriteSync only, and its power-loss
// image keeps what a SyncPrewrite covered: the prewritten ranges, with
// what was written into them before the sync, and nothing else unsynced.
func TestPrewriteFaulty(t *testing.T) {
	mem := NewMem()
	mem.MkdirAll("/d", 0o700)
	ffs := NewFaulty(mem)
	var mu sync.Mutex
	var ops []Op
	ffs.SetInjector(func(op Op, _ string) error {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
		return nil
	})
	f := prewriteFile(t, ffs, "/d/f", 4*PageSize)
	p := f.(Prewriter)
	if _, err := f.WriteAt([]byte("unsynced"), 100); err != nil { // outside the range
		t.Fatal(err)
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	if err := p.Prewrite(PageSize, 2*PageSize); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(ops) != 1 || ops[0] != OpPrewrite {
		t.Fatalf("Prewrite asked the injector for %v, want [OpPrewrite]", ops)
	}
	mu.Unlock()
	// A record written into the zeros after they were written, before
	// their sync: the sync covers it.
	if _, err := f.WriteAt([]byte("record"), PageSize+10); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	if err := p.SyncPrewrite(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(ops) != 1 || ops[0] != OpPrewriteSync {
		t.Fatalf("SyncPrewrite asked the injector for %v, want [OpPrewriteSync]", ops)
	}
	mu.Unlock()
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	h, err := img.OpenFile("/d/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := readAt(t, h, 100, 8); !bytes.Equal(got, make([]byte, 8)) {
		t.Fatalf("the image keeps %q, written outside the prewritten range and never synced", got)
	}
	if got := readAt(t, h, PageSize+10, 6); string(got) != "record" {
		t.Fatalf("the image has %q where the record written before SyncPrewrite was", got)
	}
	if got := readAt(t, h, 0, 3); string(got) != "old" {
		t.Fatalf("the image lost the synced bytes: %q", got)
	}
}

// An injected fault fails the operation and does nothing: no zeros are
// written, no range counts as durable.
func TestPrewriteFaultyInjected(t *testing.T) {
	mem := NewMem()
	mem.MkdirAll("/d", 0o700)
	ffs := NewFaulty(mem)
	f := prewriteFile(t, ffs, "/d/f", 2*PageSize)
	p := f.(Prewriter)
	boom := errors.New("boom")
	ffs.SetInjector(func(op Op, _ string) error {
		if op == OpPrewrite {
			return boom
		}
		return nil
	})
	if err := p.Prewrite(0, PageSize); !errors.Is(err, boom) {
		t.Fatalf("Prewrite with OpPrewrite failing: %v", err)
	}
	if got := readAt(t, f, 0, 3); string(got) != "old" {
		t.Fatalf("a failed Prewrite wrote zeros: %q", got)
	}
	if _, err := f.WriteAt([]byte("new"), PageSize); err != nil {
		t.Fatal(err)
	}
	ffs.SetInjector(func(op Op, _ string) error {
		if op == OpPrewriteSync {
			return boom
		}
		return nil
	})
	if err := p.Prewrite(PageSize, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncPrewrite(); !errors.Is(err, boom) {
		t.Fatalf("SyncPrewrite with OpPrewriteSync failing: %v", err)
	}
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	h, err := img.OpenFile("/d/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if size, _ := h.Size(); size > PageSize {
		if got := readAt(t, h, PageSize, 3); !bytes.Equal(got, make([]byte, 3)) {
			t.Fatalf("a failed SyncPrewrite made %q durable", got)
		}
	}
}
