package indexfile

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// TestConcurrentQueries runs readers against a writer that puts, rolls
// files, flushes and deletes old files; run it with -race. Readers check
// every result: the right key, newest first, no duplicates, at most max.
func TestConcurrentQueries(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const keys, n, maxResults = 13, 6000, 40
		x := mustOpen(t, Options{FS: fsys, Dir: dir, Slots: 16, Entries: 128})
		done := make(chan struct{})
		var wg sync.WaitGroup
		errc := make(chan error, 8)
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				lastEnd := int64(0)
				for {
					select {
					case <-done:
						return
					default:
					}
					k := rng.IntN(keys)
					got, err := x.Query(fmt.Sprintf("k%d", k), 0, math.MaxInt64, maxResults)
					if err == nil {
						err = checkResults(got, k, keys, maxResults)
					}
					if end := x.EndPhyOffset(); err == nil && end < lastEnd {
						err = fmt.Errorf("EndPhyOffset went back from %d to %d", lastEnd, end)
					} else {
						lastEnd = end
					}
					if err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		for i := range n {
			if err := x.Put(fmt.Sprintf("k%d", i%keys), int64(i)*10, t0+int64(i)*100); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 999 {
				if _, err := x.DeleteBelowPhys(max(0, int64(i-2000)*10)); err != nil {
					t.Fatal(err)
				}
				if err := x.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(done)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		got := queryAll(t, x, "k0")
		if want := int64(n-1) / keys * keys * 10; len(got) == 0 || got[0] != want {
			t.Fatalf("k0 = %v, want newest %d", got, want)
		}
	})
}

// checkResults: offsets i*10 with i%keys == k, strictly descending, <= max.
func checkResults(got []int64, k, keys, max int) error {
	if len(got) > max {
		return fmt.Errorf("%d results, max %d", len(got), max)
	}
	for i, p := range got {
		if p%10 != 0 || int(p/10)%keys != k {
			return fmt.Errorf("k%d -> offset %d of another key", k, p)
		}
		if i > 0 && p >= got[i-1] {
			return fmt.Errorf("k%d: not strictly newest first: %v", k, got)
		}
	}
	return nil
}

// TestCloseWhileQuerying: Close releases files that readers still use; the
// last reader unmaps them. Readers see results or ErrClosed, nothing else.
func TestCloseWhileQuerying(t *testing.T) {
	x, err := Open(Options{FS: vfs.NewMem(), Dir: "/i", Slots: 16, Entries: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		mustPut(t, x, fmt.Sprintf("k%d", i%7), int64(i)*10, t0)
	}
	started := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := x.Query("k3", 0, math.MaxInt64, 1000)
				once.Do(func() { close(started) })
				if errors.Is(err, ErrClosed) {
					return
				}
				if err == nil {
					err = checkResults(got, 3, 7, 1000)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	<-started
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}
