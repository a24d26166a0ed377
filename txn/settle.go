package txn

import "fmt"

// settleHow is what a Producer recorded for its half message.
type settleHow int

const (
	settleNone   settleHow = iota + 1 // nothing: the check-back decides
	settleDone                        // the op record is written
	settleOrphan                      // committed, but the op record is not written
)

// claim marks a local transaction of uniq as running: the service does
// not check its half message back meanwhile.
func (s *Service) claim(uniq string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("mqlite/txn: send: %w", ErrClosed)
	}
	s.mu.local[uniq]++
	return nil
}

// settle ends the local transaction of uniq whose half message is at
// queue offset off (-1: none stored), telling the service what was
// recorded, in one step so that no check-back slips in between.
func (s *Service) settle(uniq string, off int64, how settleHow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.local[uniq]--; s.mu.local[uniq] <= 0 {
		delete(s.mu.local, uniq)
	}
	if off < 0 || how == settleNone {
		return
	}
	e := s.mu.pending[off]
	switch {
	case e != nil && how == settleDone:
		delete(s.mu.pending, off)
	case e != nil:
		e.orphan = true
	case off < s.mu.halfNext:
		// Already read, and already resolved by its op record.
	case how == settleDone:
		s.mu.resolved.add(off)
	default:
		s.mu.orphans[off] = true
	}
}
