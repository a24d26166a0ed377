package consumer

import "github.com/mqlite/mqlite/message"

// A concurrent push consumer's fetcher may run its own queue's batches
// instead of handing them to the workers: when its member holds at least
// as many queues as there are processors (GOMAXPROCS), the fetchers alone
// keep every processor busy, and a batch consumed by the
// goroutine that decoded it is not handed over (on two cores a hand-over
// moves the batch's cache lines from core to core, over 200 ns each way
// on the machine it was measured on, and wakes a worker). The fetcher takes a worker's
// place for it (workQueue.borrow), so that no more than Goroutines
// handler calls run at once, and times its runs as a worker does: while
// its calls are long it hands its batches to the workers and keeps
// fetching, trying again once in inlineRetryEvery deliveries.

// inlineRetryEvery is how often a fetcher whose calls were long runs a
// delivery's batches itself again, to see whether they still are.
const inlineRetryEvery = 64

// inlineState is a fetcher's record of running its queue's batches. Only
// the fetcher goroutine uses it.
type inlineState struct {
	long  bool   // the last timed run took runCallMax or more a call
	runs  uint32 // runs so far; one in runTimeEvery is timed
	skips uint32 // deliveries handed to the workers since long was set
	calls int64  // handler calls run (for tests)
	// slot is the worker's place the fetcher holds (-1: none) while its
	// pulls come back full, for up to inlineHoldMax deliveries: a borrow
	// takes the shared work queue's lock, so a backlog pays it once.
	slot int
	held int
}

// inlineHoldMax is how many deliveries a fetcher runs on one borrowed
// place before it gives it back (and takes it again if it can), so that
// workers waiting for a place are not kept out for long.
const inlineHoldMax = 8

// giveBackInline returns the place p's fetcher holds, if any: before
// anything that may block it (a wait for room in its cache, a pull that
// may wait for new messages, an error backoff), when a delivery goes to
// the workers, and when it stops.
func (p *pq) giveBackInline() {
	if p.inline.slot >= 0 {
		p.m.work.giveBack(p.inline.slot)
		p.inline.slot, p.inline.held = -1, 0
	}
}

// noteCalls records whether a timed run's calls were short, writing the
// shared flag only when it changes.
func (m *member) noteCalls(short bool) {
	if m.shortCalls.Load() != short {
		m.shortCalls.Store(short)
	}
}

// inlineAllowed says whether p's fetcher should run the batches it just
// delivered itself: only once a timed run has shown the handler's calls
// short (a consumer starts by handing its batches to the workers, so a
// handler that blocks from the first call never stalls a fetcher).
func (p *pq) inlineAllowed() bool {
	m := p.m
	if m.kind != kindPush || m.o.Orderly || m.mg.o.Stepped || int(m.queues.Load()) < m.procs || !m.shortCalls.Load() {
		return false
	}
	if p.inline.long {
		if p.inline.skips++; p.inline.skips < inlineRetryEvery {
			return false
		}
		p.inline.skips = 0
	}
	return true
}

// consumeInline runs p's cached batches on the fetcher, in runs of up to
// concurrentRunMax under one lock each as a worker does, up to
// concurrentBatchesPerTask batches, and returns how many batches it left
// for the workers (tokens to push). ok is false when every worker's place
// was taken: nothing ran. full says the delivery's pull came back full.
func (m *member) consumeInline(p *pq, full bool) (left int, ok bool) {
	if p.inline.slot < 0 {
		if p.inline.slot, ok = m.work.borrow(); !ok {
			p.inline.slot = -1
			return 0, false
		}
	}
	slot := p.inline.slot
	defer func() {
		// Keep the place only while the backlog lasts and the fetcher
		// consumes all it fetched.
		if p.inline.held++; !full || left > 0 || p.inline.long || p.inline.held >= inlineHoldMax {
			p.giveBackInline()
		}
	}()
	var run [concurrentRunMax][]*message.MessageExt
	var res [concurrentRunMax]ConsumeResult
	for done := 0; done < concurrentBatchesPerTask && !p.inline.long && m.ctx.Err() == nil; {
		p.mu.Lock()
		n := 0
		for n < min(concurrentRunMax, concurrentBatchesPerTask-done) {
			if run[n] = m.takeLocked(p); run[n] == nil {
				break
			}
			n++
		}
		p.mu.Unlock()
		if n == 0 {
			break
		}
		timed := p.inline.runs%runTimeEvery == 0
		p.inline.runs++
		called, long := m.callRun(p, slot, run[:n], res[:], timed)
		p.inline.calls += int64(called)
		if timed {
			p.inline.long = long
		}
		m.finishRun(p, run[:n], res[:called], nil, false)
		done += n
	}
	p.mu.Lock()
	if p.consumableLocked() && !p.mu.paused {
		left = len(p.mu.retry) + (p.mu.msgs.len()+m.o.ConsumeBatchSize-1)/m.o.ConsumeBatchSize
	}
	p.mu.Unlock()
	return left, true
}
