package consumequeue

import (
	"errors"
	"flag"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// TestConcurrentReaders runs one writer, several readers, a flusher and a
// retention goroutine. Readers must only ever see complete, correct entries
// (or ErrNotFound below a moving MinOffset).
func TestConcurrentReaders(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		const n = 3000
		done := make(chan struct{})
		var wg sync.WaitGroup
		var reads atomic.Int64
		errc := make(chan error, 16)
		fail := func(err error) {
			select {
			case errc <- err:
			default:
			}
		}

		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 7))
				buf := make([]Entry, 9)
				for {
					select {
					case <-done:
						return
					default:
					}
					end := q.MaxOffset()
					if end == 0 {
						continue
					}
					i := rng.Int64N(end)
					got, err := q.Get(i)
					switch {
					case errors.Is(err, ErrNotFound) && i < q.MinOffset():
					case err != nil:
						fail(err)
						return
					case got != entryFor(i):
						fail(errors.New("partial or wrong entry"))
						return
					}
					k, err := q.Read(i, buf)
					switch {
					case errors.Is(err, ErrNotFound) && i < q.MinOffset():
					case err != nil:
						fail(err)
						return
					}
					for j := range k {
						if buf[j] != entryFor(i+int64(j)) {
							fail(errors.New("partial or wrong entry in batch"))
							return
						}
					}
					reads.Add(1)
				}
			}()
		}
		wg.Add(2)
		go func() { // flusher, every 64 entries
			defer wg.Done()
			last := int64(-64)
			for {
				select {
				case <-done:
					return
				default:
				}
				if q.MaxOffset() < last+64 {
					runtime.Gosched()
					continue
				}
				last = q.MaxOffset()
				if err := q.Flush(); err != nil {
					fail(err)
					return
				}
			}
		}()
		go func() { // retention, trailing the writer
			defer wg.Done()
			last := int64(0)
			for {
				select {
				case <-done:
					return
				default:
				}
				if end := q.MaxOffset(); end > 200 && end >= last+32 {
					last = end
					if _, err := q.DeleteBelowPhys(entryFor(end - 200).Offset); err != nil {
						fail(err)
						return
					}
				}
			}
		}()

		for i := int64(0); i < n; i++ {
			if err := q.Append(i, entryFor(i)); err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 { // let the readers interleave (no sleeps)
				for r := reads.Load(); reads.Load() < r+8 && len(errc) == 0; {
					runtime.Gosched()
				}
			}
		}
		for q.MinOffset() == 0 && len(errc) == 0 { // retention has run
			runtime.Gosched()
		}
		close(done)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		if q.MaxOffset() != n || q.MinOffset() < 0 {
			t.Fatalf("bounds [%d, %d)", q.MinOffset(), q.MaxOffset())
		}
		t.Logf("%d concurrent reads, min offset %d", reads.Load(), q.MinOffset())
	})
}

// TestCrashRecovery cuts power at random points: every flushed entry must
// survive, and what is recovered must be an exact prefix of what was written.
// As documented, Flush keeps up: unsynced entries never span more than the
// last three files (here: a flush at least every two files' worth).
func TestCrashRecovery(t *testing.T) {
	for seed := range uint64(*crashSeeds) {
		rng := rand.New(rand.NewPCG(seed, 99))
		ffs := vfs.NewFaulty(vfs.NewMem())
		o := Options{FS: ffs, Dir: "/cq/T/1", EntriesPerFile: testPerFile}
		q := mustOpen(t, o)
		total := 20 + rng.Int64N(200)
		var flushed int64
		for i := range total {
			if err := q.Append(i, entryFor(i)); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(30) == 0 || i+1-flushed >= 2*testPerFile {
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				flushed = i + 1
			}
		}
		crashed := ffs.Crash(rng, rng.Float64())
		closeQ(t, q)

		o.FS = crashed
		q = mustOpen(t, o)
		// Before the first flush even the first file's directory entry may
		// be lost, leaving a queue that starts at a later file.
		begin, end := q.MinOffset(), q.MaxOffset()
		if end < flushed || end > total || (flushed > 0 && begin != 0) {
			t.Fatalf("seed %d: recovered [%d, %d), flushed %d of %d", seed, begin, end, flushed, total)
		}
		checkRange(t, q, begin, end)
		appendRange(t, q, end, total+5) // re-dispatch
		closeQ(t, q)
		q = mustOpen(t, o)
		checkRange(t, q, begin, total+5)
		closeQ(t, q)
	}
}

var crashSeeds = flag.Int("crash.seeds", 30, "seeds for TestCrashRecovery")

var errInjected = errors.New("injected fault")

func TestFlushFailureFences(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	o := Options{FS: ffs, Dir: "/cq/T/2", EntriesPerFile: testPerFile}
	q := mustOpen(t, o)
	appendRange(t, q, 0, 10)
	ffs.SetInjector(func(op vfs.Op, _ string) error {
		if op == vfs.OpMapSync {
			return errInjected
		}
		return nil
	})
	wantErr(t, q.Flush(), ErrFenced, errInjected)
	ffs.SetInjector(nil)
	// A failed sync is not retried as if nothing happened.
	wantErr(t, q.Append(10, entryFor(10)), ErrFenced)
	wantErr(t, q.Flush(), ErrFenced)
	wantErr(t, q.TruncateAfterPhys(0), ErrFenced)
	_, err := q.DeleteBelowPhys(0)
	wantErr(t, err, ErrFenced)
	checkRange(t, q, 0, 10) // reads still work
	closeQ(t, q)
	q = mustOpen(t, o)
	defer closeQ(t, q)
	checkRange(t, q, 0, 10)
	appendRange(t, q, 10, 20)
}

func TestCreateFailureIsRetryable(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	o := Options{FS: ffs, Dir: "/cq/T/3", EntriesPerFile: testPerFile}
	q := mustOpen(t, o)
	defer closeQ(t, q)
	appendRange(t, q, 0, 16)
	for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpAllocate, vfs.OpMap} {
		ffs.SetInjector(func(got vfs.Op, _ string) error {
			if got == op {
				return errInjected
			}
			return nil
		})
		wantErr(t, q.Append(16, entryFor(16)), errInjected)
		ffs.SetInjector(nil)
		checkRange(t, q, 0, 16)
	}
	appendRange(t, q, 16, 40)
	checkRange(t, q, 0, 40)
}

// TestRetiredFilesReleased checks that a file dropped by retention stays
// mapped while a reader pins a snapshot holding it, and is released once
// that reader is done even though readers keep pinning the current snapshot.
func TestRetiredFilesReleased(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		appendRange(t, q, 0, 40)
		old := q.pin()
		if n, err := q.DeleteBelowPhys(entryFor(20).Offset); n != 1 || err != nil {
			t.Fatalf("DeleteBelowPhys = %d, %v", n, err)
		}
		cur := q.pin() // a reader on the new snapshot, still busy
		retired := func() int {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.mu.retired)
		}
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		equal(t, "retired while pinned", retired(), 1)
		// The removed file is still mapped for the old reader.
		if got, ok := decodeEntry(q.slot(old.segs, 3)); !ok || got != entryFor(3) {
			t.Fatalf("pinned read of a removed file = %+v, %v", got, ok)
		}
		old.readers.Add(-1)
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		equal(t, "retired after the old reader left", retired(), 0)
		cur.readers.Add(-1)
	})
}

// TestHoleWhileFlushing restarts an emptied queue further on (which removes
// and retires files from Append) while Flush and readers run.
func TestHoleWhileFlushing(t *testing.T) {
	for _, e := range []env{
		{fs: vfs.NewFaulty(vfs.NewMem()), dir: "/cq/H/0"},
		{fs: vfs.OS, dir: t.TempDir()},
	} {
		q := mustOpen(t, e.opts())
		done := make(chan struct{})
		errc := make(chan error, 4)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := q.Flush(); err != nil {
					errc <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				i := q.MaxOffset() - 1
				if got, err := q.Get(i); err == nil && got != entryFor(i) {
					errc <- errors.New("wrong entry")
					return
				} else if err != nil && !errors.Is(err, ErrNotFound) {
					errc <- err
					return
				}
			}
		}()
		next := int64(0)
		for round := range 60 {
			appendRange(t, q, next, next+int64(20+round%7))
			next = q.MaxOffset()
			if _, err := q.DeleteBelowPhys(entryFor(next).Offset); err != nil {
				t.Fatal(err)
			}
			next += int64(3 + round%40) // a hole, sometimes in the same file
			if err := q.Append(next, entryFor(next)); err != nil {
				t.Fatal(err)
			}
			next++
		}
		close(done)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		equal(t, "MaxOffset after reopen", q.MaxOffset(), next)
		closeQ(t, q)
	}
}
