package consumer

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every token pushed is popped exactly once, with pushers and workers
// racing: one wake-up in flight at a time (workQueue.wakeLocked) must
// never leave a token behind with every worker asleep.
func TestWorkQueueLosesNoWakeUp(t *testing.T) {
	const pushers, workers, perPusher = 4, 4, 5_000
	w := newWorkQueue()
	pqs := make([]*pq, pushers)
	for i := range pqs {
		pqs[i] = &pq{}
	}
	var popped [pushers]atomic.Int64
	var total atomic.Int64
	all := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				p, ok := w.pop()
				if !ok {
					return
				}
				for i := range pqs {
					if pqs[i] == p {
						popped[i].Add(1)
					}
				}
				if total.Add(1) == pushers*perPusher {
					close(all)
				}
			}
		})
	}
	for i := range pushers {
		wg.Go(func() {
			for k := 0; k < perPusher; {
				n := min(1+k%3, perPusher-k) // batches of 1 to 3 tokens
				w.push(pqs[i], n)
				k += n
			}
		})
	}
	select {
	case <-all:
	case <-time.After(20 * time.Second): // a failure detector, not synchronisation
		t.Fatalf("popped %d of %d tokens: a wake-up was lost", total.Load(), pushers*perPusher)
	}
	w.close()
	wg.Wait()
	for i := range popped {
		if got := popped[i].Load(); got != perPusher {
			t.Errorf("pq %d: popped %d tokens, pushed %d", i, got, perPusher)
		}
	}
}

// A push while a wake-up is in flight (handed to a worker that has not
// run yet) sends no second one: a second worker woken would run first,
// ahead of the one holding the older token.
func TestWorkQueueOneWakeUpInFlight(t *testing.T) {
	w := newWorkQueue()
	defer w.close()
	p := &pq{}
	w.push(p, 1)
	<-w.signal // as a worker blocked in pop is handed the wake-up
	w.push(p, 1)
	if n := len(w.signal); n != 0 {
		t.Fatalf("a second wake-up was sent while the first was in flight")
	}
	// Both tokens are still there for the workers.
	w.signal <- struct{}{}
	for range 2 {
		got, ok := w.pop()
		if !ok || got != p {
			t.Fatalf("pop = %v, %v", got, ok)
		}
	}
}
