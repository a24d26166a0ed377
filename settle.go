package mqlite

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
)

// Settle returns once the store and its consumers have done all the work
// that is due at the clock's current time: every stored message is
// visible, the delay levels and the timer service have delivered every
// message due, and every push consumer has fetched its queues to the end,
// run its handler on every fetched message and stored what the handler
// sent back (retries, dead letters); pull consumers have fetched
// everything, ready for Poll (or TryPoll). It loops until a whole round
// changes nothing, so work that causes more work (a failed message sent
// back, delivered again once due, sent back again...) is followed to the
// end. It is a barrier for tests and harnesses driving Options.Clock by
// hand (a clock.Fake): Advance the clock, Settle, then check. It does not
// move the clock, and its result is only meaningful while nothing else
// sends or advances the clock meanwhile. Work due later (a retry waiting
// for its delay level, a local redelivery waiting for SuspendInterval) is
// not waited for; transaction check-back rounds and retention passes are
// run on their own schedule (CheckTransactions and CleanExpired run them
// now). A handler that never returns, or a queue waiting for a lock
// another member holds, makes Settle wait until ctx ends: pass a ctx with
// a deadline. Between its checks Settle waits briefly on the real clock
// (10 µs growing to 1 ms) for the store's goroutines to run; it never
// waits on Options.Clock.
//
// With Options.Stepped, Settle does that work itself, on the caller's
// goroutine, in a fixed order: first a transaction check-back round if
// TxCheckInterval has passed on the clock since the last one, then
// rounds of: the delay levels' due messages (levels ascending, each in
// queue order), the timer service's (by due time, then CommitLog order),
// then every consumer in creation order (see consumer.Manager.Step: its
// queues in topic and queue ID order, fetched, and for a push consumer
// the handler called batch by batch in offset order, each result applied
// before the next call), until a round stores, fetches and consumes
// nothing. It never sleeps; one Settle runs at a time, and a Close meanwhile
// cancels the running handler's ctx and waits for Settle to return
// (ErrClosed).
func (s *Store) Settle(ctx context.Context) error {
	if err := s.enter(ctx, "settle"); err != nil {
		return err
	}
	if s.closed.Load() {
		return errs.ErrClosed
	}
	if s.readOnly {
		return nil
	}
	if s.repl.isReplica() {
		return s.WaitVisible(ctx) // no delay or timer pass runs before Promote
	}
	if s.opts.Stepped {
		return s.settleStepped(ctx)
	}
	var pause time.Duration
	for {
		mark := s.settleMark()
		if err := s.settleRound(ctx); err != nil {
			return err
		}
		if s.consumers().Idle() && s.settleMark() == mark {
			return nil
		}
		// Something moved or a consumer is still busy: wait a little
		// for its goroutines (they run on real time, not the clock's),
		// then go round again.
		pause = min(max(2*pause, 10*time.Microsecond), time.Millisecond)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// settleRound makes everything stored visible and has the delay levels
// and the timer service each run one pass over what is due.
func (s *Store) settleRound(ctx context.Context) error {
	if err := s.WaitVisible(ctx); err != nil {
		return err
	}
	if err := s.sched().Settle(ctx); err != nil {
		return err
	}
	if err := s.timers().Settle(ctx); err != nil {
		return err
	}
	return s.WaitVisible(ctx)
}

// settleMark is what Settle compares across a round: the CommitLog's end
// (anything stored) and the consumers' activity (anything fetched,
// consumed, committed).
type settleMark struct {
	end      int64
	activity uint64
}

func (s *Store) settleMark() settleMark {
	return settleMark{end: s.log.WrotePosition(), activity: s.consumers().Activity()}
}
