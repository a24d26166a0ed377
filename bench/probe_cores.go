package bench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// coreHandoffRounds is how many round trips probeCoreHandoff times.
const coreHandoffRounds = 200_000

// probeCoreHandoff measures what it costs one core to see a write made
// on another: two goroutines, each on its own OS thread, pass a counter
// back and forth through one atomic word, spinning until it is their
// turn. A round trip moves the word's cache line from core to core and
// back, so half of it is the least a hand-over between goroutines on two
// cores costs (a message handed from a fetcher to a handler, a lock or an
// atomic counter taken on the other core). The P50 and P99 are of
// batches of 1,000 round trips, per round trip. It needs two processors
// (GOMAXPROCS >= 2); with fewer the probe is skipped.
func probeCoreHandoff(Job) (Limit, error) { return coreHandoff(coreHandoffRounds) }

// coreHandoff is probeCoreHandoff with rounds round trips (a multiple of
// 1,000).
func coreHandoff(rounds int64) (Limit, error) {
	l := Limit{Name: "cache line handed between two cores (atomic ping-pong)"}
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		l.Note = "skipped: needs two processors"
		return l, nil
	}
	var word atomic.Int64
	const batch = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := int64(1); i < 2*rounds; i += 2 {
			spinUntil(&word, i)
			word.Store(i + 1)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var h Hist
	start := time.Now()
	t := start
	for r := int64(0); r < rounds; r++ {
		spinUntil(&word, 2*r)
		word.Store(2*r + 1)
		if (r+1)%batch == 0 {
			now := time.Now()
			h.Record(now.Sub(t) / batch)
			t = now
		}
	}
	<-done
	secs := time.Since(start).Seconds()
	l.OpsPerSec = float64(rounds) / secs
	l.P50, l.P99 = h.Quantile(0.5), h.Quantile(0.99)
	l.Note = fmt.Sprintf("%d round trips; one way ~%.0f ns (half the P50)", rounds, float64(l.P50.Nanoseconds())/2)
	return l, nil
}

// spinUntil spins until w holds v, yielding the processor now and then so
// that a descheduled partner can run.
func spinUntil(w *atomic.Int64, v int64) {
	for i := 0; w.Load() != v; i++ {
		if i%(1<<16) == 1<<16-1 {
			runtime.Gosched()
		}
	}
}
