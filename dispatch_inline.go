package mqlite

// Caller-runs dispatch. Handing a record to the dispatcher goroutine costs
// a wake-up, and when the dispatcher sleeps that wake-up is the latency:
// the woken goroutine waits in the sender's run queue until the sender
// blocks or an idle core wakes up and steals it, tens to hundreds of
// microseconds on a virtual machine, for a few hundred nanoseconds of
// work. So a sender that finds the loop asleep dispatches the new records
// itself, if nobody else is dispatching (it never waits for that), and its
// record is readable when Put returns. If that woke a blocked reader, the
// sender then yields (runtime.Gosched) so the reader runs at once instead
// of waiting in the sender's run queue in turn: under a steady 10,000
// messages a second that took end-to-end p50 from 35-50 µs to 3-5 µs.
//
// That moves the dispatch work onto the senders, one record at a time
// (~0.7 µs each, against ~0.3 µs in the loop's batches on the other
// core), which only pays while the rate is low. So every inlineWindowMs
// the first sender to get here measures the put rate of the last window
// (long enough that the catch-up burst of a sender descheduled for a
// millisecond or two does not count as a high rate), and above
// inlineMaxPerMs puts per millisecond the senders wake the loop instead,
// which then keeps up beside them. They also do that when they
// find someone else dispatching (they never wait), or more than
// inlineMaxBytes waiting (a large batch, whose dispatch then overlaps the
// sender's next appends).

const (
	inlineMaxPerMs = 500 // puts per millisecond, 500,000 per second
	inlineWindowMs = 4   // how long the rate is measured over
	inlineMaxBytes = 64 << 10
	// yieldMaxPerMs bounds the put rate at which a dispatch that woke
	// readers yields to them (yield), 250,000 puts a second. Above it
	// the readers' work had better run beside the producers than in
	// their place: a producer and a consumer at full speed went from a
	// median of 0.72 M to 0.43 M msgs/s with a yield after every waking
	// dispatch, and are back at the old speed with this bound.
	yieldMaxPerMs = 250
)

// inlineWindow is the senders' estimate of the put rate; guarded by run.
type inlineWindow struct {
	ms     int64 // when the window started
	puts   int64 // Store puts counted then
	inline bool  // the last window's rate allows caller-runs dispatch
	yield  bool  // and yielding to woken readers
}

// notifySender is notify for a sender that just published a record: while
// the loop sleeps, nobody else dispatches and the rate is low, it
// dispatches the new records itself; otherwise it wakes the loop. It
// never blocks.
func (d *dispatcher) notifySender() {
	if !d.sleeping.Load() {
		return // the loop looks for new records before it sleeps
	}
	if d.run.TryLock() {
		done, woke, mark := d.stopped, false, uint64(0) // a put racing with Close: nothing to wake either
		if !done && d.inlineAllowed() {
			if to := d.confirmed(); to-d.next <= inlineMaxBytes {
				// An error is left to the loop, which retries the same
				// records (dispatch is idempotent) and reports it.
				done = d.catchUp(to) == nil
				woke, mark = d.woke && d.inline.yield, d.wokeMark
			}
		}
		d.run.Unlock()
		if woke {
			d.yield(mark)
		}
		if done {
			return
		}
	}
	d.notify()
}

// yield lets the readers the last catchUp woke run now: each waits in the
// waking goroutine's run queue until that goroutine blocks or an idle core
// steals it (tens of µs or more on a VM). mark is d.ran when they were
// woken. Called without run.
//
// Gosched runs the reader woken last (it is next in this P's queue),
// except on one schedule in 61, when for fairness the scheduler takes the
// global queue first and finds the yielder itself there: then the reader
// would wait as if there had been no yield (1.7% of yields in
// BenchmarkReadQueuePaced). So if no woken reader has run by then, yield
// once more; two schedules in a row are never both that one.
func (d *dispatcher) yield(mark uint64) {
	if d.onYield != nil {
		d.onYield()
	}
	d.gosched()
	if d.ran.Load() == mark {
		d.gosched()
	}
}

// inlineAllowed starts a new rate window once inlineWindowMs have passed
// (or the clock went back) and reports whether the rate of the finished
// one was low. Called with run held.
func (d *dispatcher) inlineAllowed() bool {
	w := &d.inline
	if now := d.s.nowMs(); now-w.ms >= inlineWindowMs || now < w.ms {
		puts := d.s.metrics.puts.Load()
		w.inline = now > w.ms && puts-w.puts <= inlineMaxPerMs*(now-w.ms)
		w.yield = now > w.ms && puts-w.puts <= yieldMaxPerMs*(now-w.ms)
		w.ms, w.puts = now, puts
	}
	return w.inline
}
