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
	w := newWorkQueue(64)
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
			finished := false
			for {
				p, ok := w.pop(finished)
				if !ok {
					return
				}
				finished = true
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
	w := newWorkQueue(64)
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
		got, ok := w.pop(false)
		if !ok || got != p {
			t.Fatalf("pop = %v, %v", got, ok)
		}
	}
}

// Tokens pushed together for one queue are one entry; tokens a worker
// claimed are dropped from the queue's earliest entries, so the queue
// keeps its place behind the others; every token is accounted for once.
func TestWorkQueueClaimedTokens(t *testing.T) {
	w := newWorkQueue(64)
	defer w.close()
	a, b := &pq{}, &pq{}
	w.push(a, 3)
	w.push(a, 2) // merges with a's entry: 5 tokens
	w.push(b, 2)
	w.push(a, 1)
	if n := len(w.mu.items); n != 3 {
		t.Fatalf("%d entries, want 3 (a 5, b 2, a 1)", n)
	}
	if got, ok := w.pop(false); !ok || got != a {
		t.Fatalf("first pop = %p, want a", got)
	}
	// The worker goes on with a and asks for 6 more tokens: it gets the
	// 5 a has left (4 in the first entry, 1 in the last).
	if n := a.claim(6); n != 5 {
		t.Fatalf("claimed %d of a's tokens, want the 5 left", n)
	}
	if a.claimNext() {
		t.Fatal("claimed a token of a with none unclaimed")
	}
	// The claimed tokens are dropped on the way: b is next, twice.
	for range 2 {
		if got, ok := w.pop(false); !ok || got != b {
			t.Fatalf("pop = %p, want b", got)
		}
	}
	if w.mu.head != len(w.mu.items)-1 || a.tokens.Load() != claimedToken {
		t.Fatalf("after b's tokens: head %d of %d entries, a's tokens %#x (want one claimed, in the last entry)",
			w.mu.head, len(w.mu.items), a.tokens.Load())
	}
	w.push(b, 1)
	if got, ok := w.pop(false); !ok || got != b {
		t.Fatalf("pop = %p, want b (a's last token is claimed)", got)
	}
	if a.tokens.Load() != 0 || b.tokens.Load() != 0 || len(w.mu.items) != 0 {
		t.Fatalf("tokens left: a %#x, b %#x, %d entries", a.tokens.Load(), b.tokens.Load(), len(w.mu.items))
	}
}

// A worker counts as busy from the pop that gives it a token until it
// comes back for the next; each return counts one token done.
func TestWorkQueueBusyUntilBack(t *testing.T) {
	w := newWorkQueue(64)
	p := &pq{}
	w.push(p, 2)
	if w.idle() {
		t.Fatal("idle with tokens queued")
	}
	if got, ok := w.pop(false); !ok || got != p {
		t.Fatalf("pop = %v, %v", got, ok)
	}
	if w.idle() || w.doneCount() != 0 {
		t.Fatalf("a worker holds a token: idle %t, done %d", w.idle(), w.doneCount())
	}
	if got, ok := w.pop(true); !ok || got != p {
		t.Fatalf("second pop = %v, %v", got, ok)
	}
	if w.idle() || w.doneCount() != 1 {
		t.Fatalf("the second token is held: idle %t, done %d", w.idle(), w.doneCount())
	}
	w.close()
	if _, ok := w.pop(true); ok {
		t.Fatal("pop after close")
	}
	if !w.idle() || w.doneCount() != 2 {
		t.Fatalf("the worker is back and the queue empty: idle %t, done %d", w.idle(), w.doneCount())
	}
}
