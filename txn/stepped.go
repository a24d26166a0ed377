package txn

import (
	"context"
	"fmt"
)

// Step runs a check round (as CheckNow) when CheckInterval has passed on
// the clock since Start or the round Step ran last, as the periodic round
// would have; otherwise it does nothing. For ServiceOptions.Stepped
// (ErrInvalidArgument otherwise), where no round runs on its own; a
// store's Settle calls it once per call.
func (s *Service) Step(ctx context.Context) error {
	if !s.opts.Stepped {
		return fmt.Errorf("mqlite/txn: Step needs ServiceOptions.Stepped: %w", ErrInvalidArgument)
	}
	s.mu.Lock()
	started := s.mu.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	now := s.opts.Clock.Now()
	next := s.nextStep.Load()
	if now.UnixNano() < next {
		return nil
	}
	// The next round falls due CheckInterval after this one, as a ticker.
	s.nextStep.Store(now.Add(s.opts.CheckInterval).UnixNano())
	return s.CheckNow(ctx)
}
