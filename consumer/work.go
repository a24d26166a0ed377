package consumer

import (
	"container/heap"
	"sync"
	"time"

	"github.com/mqlite/mqlite/clock"
)

// workQueue is the FIFO of queue tokens a push consumer's handler
// goroutines take work from. A token says "pq may have a batch to
// consume"; the worker takes the batch from the pq itself, so the batches
// of a queue start in offset order and a dropped queue's batches are
// simply never taken. It is unbounded, but its length is bounded by the
// per-queue cache limits (at most one token per cached batch, one per
// orderly queue). The tokens of a pq are interchangeable: a worker
// finishing a batch may claim some without taking them off the FIFO, and
// pop then drops the pq's earliest tokens (see pq.tokens). Tokens pushed
// together are one entry.
type workQueue struct {
	signal chan struct{} // cap 1: a token may be waiting (see wake)
	quit   chan struct{}
	// stepped (ManagerOptions.Stepped): no worker pops; push marks the
	// pq ready (mu.ready) for Step instead of queueing tokens.
	stepped bool
	// limit is how many handler calls may run at once (Goroutines): the
	// workers and the fetchers that borrowed a slot to run their own
	// queue's batches (borrow) together.
	limit int
	mu    struct {
		sync.Mutex
		items []tokenRun
		head  int
		// busy counts the workers between taking a token and coming
		// back for the next, and the borrowed slots, done the tokens and
		// borrows they finished: both move under the lock pop takes
		// anyway, so the handler path pays no atomic for Settle's idle
		// check and activity count. A worker takes a token only while
		// busy < limit.
		busy int
		done uint64
		// free holds the runSlot indexes a borrower may take (limit of
		// them, after the workers' own).
		free []int
		// waking: a wake-up was sent that no worker has acted on yet
		// (it is in signal, or a worker has it and has not yet taken
		// the lock). Until one does, wake sends no other.
		waking bool
		ready  map[*pq]struct{} // stepped: queues with work announced
	}
}

// tokenRun is n consecutive tokens of p on the work queue.
type tokenRun struct {
	p *pq
	n int
}

// newWorkQueue returns the work queue of limit workers, whose runSlots
// are 0..limit-1; borrowers get limit..2*limit-1.
func newWorkQueue(limit int) *workQueue {
	w := &workQueue{signal: make(chan struct{}, 1), quit: make(chan struct{}), limit: limit}
	for i := 2*limit - 1; i >= limit; i-- {
		w.mu.free = append(w.mu.free, i)
	}
	return w
}

// borrow takes a worker's place for a fetcher that runs its own queue's
// batches (see pq.consumeInline): it counts as busy, so that at most
// limit handler calls run at once, and gets a runSlot index of its own.
// False when every place is taken.
func (w *workQueue) borrow() (slot int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.busy >= w.limit || len(w.mu.free) == 0 {
		return 0, false
	}
	w.mu.busy++
	slot = w.mu.free[len(w.mu.free)-1]
	w.mu.free = w.mu.free[:len(w.mu.free)-1]
	return slot, true
}

// giveBack ends a borrow: the place counts as done, and a worker is woken
// when tokens wait (a worker may have found every place taken).
func (w *workQueue) giveBack(slot int) {
	w.mu.Lock()
	w.mu.busy--
	w.mu.done++
	w.mu.free = append(w.mu.free, slot)
	send := w.mu.head < len(w.mu.items) && w.wakeLocked()
	w.mu.Unlock()
	if send {
		w.signal <- struct{}{}
	}
}

// push adds n tokens for p.
func (w *workQueue) push(p *pq, n int) {
	if n <= 0 {
		return
	}
	if w.stepped {
		w.markReady(p)
		return
	}
	p.addTokens(n)
	w.mu.Lock()
	if k := len(w.mu.items); k > w.mu.head && w.mu.items[k-1].p == p {
		w.mu.items[k-1].n += n
	} else {
		w.mu.items = append(w.mu.items, tokenRun{p, n})
	}
	send := w.wakeLocked()
	w.mu.Unlock()
	if send {
		w.signal <- struct{}{}
	}
}

// wakeLocked reports whether the caller, once it has let go of the lock,
// must send a wake-up to let one waiting worker look at the queue. A
// worker that takes a token and leaves more behind wakes the next one, so
// n tokens wake workers one at a time as they are needed, not n at once.
//
// Only one wake-up is in flight at a time. A send to a worker blocked on
// signal hands the token to it at once and leaves the channel empty, so
// without this a second push before that worker ran woke a second worker,
// and the Go scheduler runs the goroutine readied last first: the first
// one, holding the older batch, then waited behind it (95 µs in a trace
// of BenchmarkEndToEndPaced). Now the send never blocks: the channel holds
// one token and none is in flight when it is sent.
func (w *workQueue) wakeLocked() bool {
	if w.mu.waking {
		return false
	}
	w.mu.waking = true
	return true
}

// pop takes the next token, or blocks until there is one; false once the
// queue is closed. Tokens a worker already claimed for its queue (see
// pq.claim) are dropped on the way. finished says the worker is back from
// the token it took last.
func (w *workQueue) pop(finished bool) (*pq, bool) {
	woken := false
	for {
		w.mu.Lock()
		if finished {
			w.mu.busy--
			w.mu.done++
			finished = false
		}
		if woken {
			w.mu.waking, woken = false, false
		}
		for w.mu.head < len(w.mu.items) && w.mu.busy < w.limit {
			it := &w.mu.items[w.mu.head]
			p := it.p
			used, take := p.popTokens(it.n)
			if it.n -= used; it.n == 0 {
				*it = tokenRun{}
				w.mu.head++
			}
			if w.mu.head == len(w.mu.items) {
				w.mu.items, w.mu.head = w.mu.items[:0], 0
			} else if w.mu.head > 1024 && w.mu.head > len(w.mu.items)/2 {
				n := copy(w.mu.items, w.mu.items[w.mu.head:])
				clear(w.mu.items[n:])
				w.mu.items, w.mu.head = w.mu.items[:n], 0
			}
			if take {
				w.mu.busy++
				send := w.mu.head < len(w.mu.items) && w.wakeLocked()
				w.mu.Unlock()
				if send {
					w.signal <- struct{}{}
				}
				return p, true
			}
		}
		w.mu.Unlock()
		select {
		case <-w.signal:
			woken = true
		case <-w.quit:
			return nil, false
		}
	}
}

// close makes every pop return false (tokens left are dropped).
func (w *workQueue) close() { close(w.quit) }

// delayer runs functions after a delay on the clock (suspended orderly
// queues, local redelivery). One goroutine, one timer for the earliest
// item.
type delayer struct {
	clk  clock.Clock
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	mu   struct {
		sync.Mutex
		items  delayHeap
		seq    uint64
		firing int // items taken off the heap and not yet run (see due)
	}
}

// newDelayer starts the delayer's goroutine; a stepped one has none (its
// items run from runDue).
func newDelayer(clk clock.Clock, stepped bool) *delayer {
	d := &delayer{clk: clk, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if stepped {
		close(d.done)
		return d
	}
	go d.run()
	return d
}

// after runs fn on the delayer's goroutine once d has passed. fn must not
// block. Items still waiting at close are dropped.
func (d *delayer) after(dur time.Duration, fn func()) {
	at := d.clk.Now().Add(dur)
	d.mu.Lock()
	d.mu.seq++
	heap.Push(&d.mu.items, delayItem{at: at, seq: d.mu.seq, fn: fn})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *delayer) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		now := d.clk.Now()
		var due []func()
		for len(d.mu.items) > 0 && !d.mu.items[0].at.After(now) {
			due = append(due, heap.Pop(&d.mu.items).(delayItem).fn)
		}
		var wait time.Duration = -1
		if len(d.mu.items) > 0 {
			wait = d.mu.items[0].at.Sub(now)
		}
		d.mu.firing = len(due)
		d.mu.Unlock()
		for _, fn := range due {
			fn()
		}
		if len(due) > 0 {
			d.mu.Lock()
			d.mu.firing = 0
			d.mu.Unlock()
			continue
		}
		var timer clock.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			timer = d.clk.NewTimer(wait)
			tc = timer.C()
		}
		select {
		case <-tc:
		case <-d.wake:
		case <-d.quit:
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

func (d *delayer) close() {
	close(d.quit)
	<-d.done
}

type delayItem struct {
	at  time.Time
	seq uint64
	fn  func()
}

type delayHeap []delayItem

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h delayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)   { *h = append(*h, x.(delayItem)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = delayItem{}
	*h = old[:len(old)-1]
	return x
}
