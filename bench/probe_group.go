package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// probeGroup measures the ceiling of a group commit with no store around
// it: 16 writer goroutines each append a record of size bytes to a shared
// buffer and wait; one syncer goroutine waits until every writer has
// appended (a perfect gather: 16 records per sync), writes them with one
// pwrite into a pre-written (zero-filled and synced) file, fdatasyncs,
// and wakes every writer with one broadcast. ops/s is records per second
// (16 x the rate of such syncs); p50/p99 are per send.
func probeGroup(size int) func(Job) (Limit, error) {
	return func(j Job) (Limit, error) {
		const writers = 16
		l := Limit{Name: fmt.Sprintf("group commit of %d writers, %s records: pwrite + fdatasync, pre-written file", writers, sizeName(size))}
		perWriter := max(j.FsyncOps, 16)
		total := int64(writers*perWriter) * int64(size)
		f, err := preWritten(filepath.Join(j.Dir, fmt.Sprintf("group-%d", size)), total)
		if err != nil {
			return l, err
		}
		defer f.Close()
		g := &groupProbe{f: f, want: writers}
		g.synced.L, g.kick.L = &g.mu, &g.mu
		go g.syncer(size)
		hists := make([]Hist, writers)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := newBodyPool(size).body(w)
				for range perWriter {
					t := time.Now()
					if err := g.send(rec); err != nil {
						return
					}
					hists[w].Record(time.Since(t))
				}
			}()
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		syncs, err := g.stop()
		if err != nil {
			return l, err
		}
		var h Hist
		for i := range hists {
			h.Merge(&hists[i])
		}
		l.OpsPerSec = float64(writers*perWriter) / secs
		l.P50, l.P99 = h.Quantile(0.5), h.Quantile(0.99)
		l.Note = fmt.Sprintf("%d records, %.1f per sync, %.0f syncs/s", writers*perWriter,
			float64(writers*perWriter)/float64(max(syncs, 1)), float64(syncs)/secs)
		return l, f.Close()
	}
}

// preWritten creates a file of n zero bytes (rounded up to 1 MiB),
// written and synced, and leaves its pages in the page cache.
func preWritten(path string, n int64) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zero)) {
		if _, err := f.Write(zero); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := fdatasync(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// groupProbe is the minimal group commit probeGroup drives.
type groupProbe struct {
	f      *os.File
	mu     sync.Mutex
	synced sync.Cond // broadcast after each sync
	kick   sync.Cond // wakes the syncer
	buf    []byte    // records appended since the last pwrite
	want   int       // records per sync: the writers
	pos    int64     // file offset of buf[0]
	done   int64     // synced below this offset
	err    error
	quit   bool
	n      int64 // syncs
}

func (g *groupProbe) send(rec []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, rec...)
	end := g.pos + int64(len(g.buf))
	if len(g.buf) >= g.want*len(rec) {
		g.kick.Signal()
	}
	for g.done < end && g.err == nil {
		g.synced.Wait()
	}
	return g.err
}

func (g *groupProbe) syncer(size int) {
	var out []byte
	g.mu.Lock()
	for {
		for len(g.buf) < g.want*size && !g.quit {
			g.kick.Wait()
		}
		if len(g.buf) == 0 {
			g.mu.Unlock()
			return
		}
		out, g.buf = g.buf, out[:0]
		at := g.pos
		g.pos += int64(len(out))
		g.mu.Unlock()
		_, err := g.f.WriteAt(out, at)
		if err == nil {
			err = fdatasync(g.f)
		}
		g.mu.Lock()
		g.n++
		g.done = at + int64(len(out))
		if err != nil {
			g.err = err
		}
		g.synced.Broadcast()
	}
}

func (g *groupProbe) stop() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.quit = true
	g.kick.Signal()
	return g.n, g.err
}
