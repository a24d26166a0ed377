package consumer

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// runRecorder is a handler for the run tests: every call waits for gate
// (or its ctx), then records its offsets.
type runRecorder struct {
	gate chan struct{}
	mu   sync.Mutex
	offs []int64
}

func newRunRecorder() *runRecorder { return &runRecorder{gate: make(chan struct{})} }

func (r *runRecorder) handle(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
	select {
	case <-r.gate:
	case <-ctx.Done():
		return ReconsumeLater
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.offs = append(r.offs, m.QueueOffset)
	}
	return ConsumeSuccess
}

func (r *runRecorder) sorted() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.offs))
}

// withRuns runs fn in a synctest bubble on a new env with the consumer
// startRuns started, its handler r.handle.
func withRuns(t *testing.T, fn func(t *testing.T, e *envC, r *runRecorder, c *PushConsumer)) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		r := newRunRecorder()
		fn(t, e, r, startRuns(t, e, r))
	})
}

// startRuns starts a push consumer with two goroutines on a queue with a
// backlog of 100, more than it caches (so its pulls are full, and each
// goroutine takes a run of batches), and waits until both goroutines are
// in their first call.
func startRuns(t *testing.T, e *envC, r *runRecorder) *PushConsumer {
	t.Helper()
	e.st.createTopic("t", 1)
	e.st.putMany("t", 100, "m")
	c := e.push("g", Options{Goroutines: 2, QueueCacheCount: 40, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", r.handle)
	synctest.Wait()
	if s := c.Stats(); s.Fetched < 32 || s.Consumed != 0 {
		t.Fatalf("stats before the gate opened: %+v", s)
	}
	return c
}

// A run taken before its queue is dropped (here by Shutdown) is consumed
// whole: stopping part way would leave its later batches below messages
// the other goroutine consumed, so the commit would stop there and the
// next owner would get those messages again.
func TestPushRunFinishesWhenQueueDropped(t *testing.T) {
	withRuns(t, func(t *testing.T, e *envC, r *runRecorder, c *PushConsumer) {
		done := make(chan error, 1)
		go func() { done <- c.Shutdown(context.Background()) }()
		synctest.Wait()
		close(r.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := r.sorted()
		// Both runs finished after Shutdown began: more than the two calls
		// that were running then.
		if len(got) <= 2 {
			t.Fatalf("consumed %v: the runs did not finish", got)
		}
		committed := e.committed("g", "", "t", 0)
		if int64(len(got)) != committed || got[len(got)-1] != committed-1 {
			t.Fatalf("consumed %v, committed %d: want exactly the offsets below the commit", got, committed)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}

		// The next consumer gets the rest, nothing twice.
		r2 := newRunRecorder()
		close(r2.gate)
		c2 := e.push("g", Options{}, "t", r2.handle)
		synctest.Wait()
		if all := slices.Sorted(slices.Values(append(got, r2.sorted()...))); !slices.Equal(all, seq(0, 100)) {
			t.Fatalf("the two consumers consumed %v, want 0..99 once each", all)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A run stops when its queue is revoked (reset by Seek): the rest of it
// belongs to the old position and is not delivered.
func TestPushRunStopsWhenRevoked(t *testing.T) {
	withRuns(t, func(t *testing.T, e *envC, r *runRecorder, c *PushConsumer) {
		if err := c.Seek("t", 0, 50); err != nil {
			t.Fatal(err)
		}
		close(r.gate)
		synctest.Wait()
		got := r.sorted()
		// The two calls running at the Seek (offset 0 and one more below
		// 50), then 50..99 once each.
		if len(got) != 52 || got[0] != 0 || got[1] >= 50 || !slices.Equal(got[2:], seq(50, 100)) {
			t.Fatalf("delivered %v, want 0, one more offset below 50, then 50..99", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Close stops a run at once: the calls running end through their ctx and
// no later batch of the run starts.
func TestPushRunStopsAtClose(t *testing.T) {
	withRuns(t, func(t *testing.T, e *envC, _ *runRecorder, c *PushConsumer) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		if s.Failed != 2 || s.Consumed != 0 {
			t.Fatalf("after Close: %d failed, %d consumed; want the 2 running calls failed and no other call", s.Failed, s.Consumed)
		}
		if off := e.committed("g", "", "t", 0); off > 0 {
			t.Fatalf("committed %d with nothing consumed", off)
		}
	})
}

// seq is from..to-1.
func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A worker whose calls take long (here 1 ms each, virtual) stops taking
// runs: a call that blocks then holds back no other batch, and the other
// goroutine consumes everything else meanwhile.
func TestPushLongCallsTurnRunsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		e.st.putMany("t", 100, "m")
		gate, blocked, others := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		done := 0
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			if msgs[0].QueueOffset == 50 {
				close(blocked)
				select {
				case <-gate:
				case <-ctx.Done():
					return ReconsumeLater
				}
			} else {
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if done++; done == 99 {
				close(others)
			}
			return ConsumeSuccess
		}
		c := e.push("g", Options{Goroutines: 2, QueueCacheCount: 40, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		waitFor(t, blocked, "the call at offset 50")
		waitFor(t, others, "the 99 other messages while offset 50 blocks")
		close(gate)
		synctest.Wait()
		if s := c.Stats(); s.Consumed != 100 {
			t.Fatalf("consumed %d, want 100", s.Consumed)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRunCallsTimeOutOneByOne: the calls of a run share one swap between
// them (one ends and the next starts), yet the consume timeout still sees
// each call on its own: a run of short calls lasting several timeouts is
// never cancelled, and a call that runs past the timeout in the middle of
// a run is the only one cancelled and failed; the call after it gets a
// fresh context.
func TestRunCallsTimeOutOneByOne(t *testing.T) {
	const timeout = time.Minute
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &member{kind: kindPush, clk: fake, ctx: ctx, mg: &Manager{}, log: slog.New(slog.DiscardHandler)}
	m.o.ConsumeTimeout = timeout
	m.slots = make([]runSlot, 1)
	m.slots[0].parent, m.slots[0].release = context.WithCancel(ctx)
	defer m.slots[0].release()
	p := newPQ(m, Queue{Topic: "t"}, &subscription{topic: "t"})
	var ctxs []context.Context
	var errs []error
	m.h = func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
		ctxs = append(ctxs, ctx)
		// Each call sees two checks: the first as it starts, the
		// second 0.6 of a timeout later, so that five short calls
		// span three timeouts. The slow one sees a third check a
		// timeout after its first: the check cancels it.
		m.checkTimeouts()
		fake.Advance(timeout * 6 / 10)
		m.checkTimeouts()
		if string(msgs[0].Body) == "slow" {
			fake.Advance(timeout)
			m.checkTimeouts()
		}
		errs = append(errs, ctx.Err())
		return ConsumeSuccess
	}
	bodies := []string{"a", "b", "slow", "c", "d"}
	run := make([][]*message.MessageExt, len(bodies))
	for i, b := range bodies {
		run[i] = []*message.MessageExt{{Message: message.Message{Body: []byte(b)}}}
	}
	res := make([]ConsumeResult, len(run))
	called, _ := m.callRun(p, 0, run, res, false)
	if called != len(run) {
		t.Fatalf("%d calls, want %d", called, len(run))
	}
	want := []ConsumeResult{ConsumeSuccess, ConsumeSuccess, ReconsumeLater, ConsumeSuccess, ConsumeSuccess}
	if !slices.Equal(res, want) {
		t.Fatalf("results %v, want %v", res, want)
	}
	wantErrs := []error{nil, nil, context.Canceled, nil, nil}
	if !slices.Equal(errs, wantErrs) {
		t.Fatalf("ctx.Err() seen by the calls %v, want %v", errs, wantErrs)
	}
	if ctxs[0] != ctxs[2] || ctxs[3] == ctxs[2] || ctxs[3] != ctxs[4] {
		t.Fatal("want one context up to the timed-out call and a fresh one after it")
	}
	s := m.statsSnapshot()
	if s.Timeouts != 1 || s.Failed != 1 || s.Consumed != 4 {
		t.Fatalf("stats %+v, want 1 timeout, 1 failed, 4 consumed", s)
	}
	if seq := m.slots[0].seq.Load(); seq&1 != 0 {
		t.Fatalf("seq %d is odd after the run: the slot still shows a call running", seq)
	}
}
