package mqlite

import (
	"context"
	"errors"

	"github.com/mqlite/mqlite/internal/errs"
)

// settleStepped is Settle under Options.Stepped: the store's background
// work, run here in a fixed order (see Settle) until a round changes
// nothing. Each service checks under its own lock that it is still open,
// so a Close meanwhile makes this return ErrClosed rather than touch
// what Close released.
func (s *Store) settleStepped(ctx context.Context) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	if err := s.WaitVisible(ctx); err != nil {
		return err
	}
	if err := s.txn().Step(ctx); err != nil {
		if s.closed.Load() || errors.Is(err, errs.ErrClosed) {
			return errs.ErrClosed
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A checker failing: logged by the round and retried by the next
		// one, as the periodic round does.
		s.opts.Logger.Warn("mqlite: transaction check round", "err", err)
	}
	for {
		if s.closed.Load() {
			return errs.ErrClosed
		}
		mark := s.settleMark()
		if err := s.settleRound(ctx); err != nil {
			return err
		}
		if err := s.consumers().Step(ctx); err != nil {
			return err
		}
		if err := s.WaitVisible(ctx); err != nil {
			return err
		}
		if s.settleMark() == mark {
			return nil
		}
	}
}
