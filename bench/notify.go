package bench

import (
	"sync"
	"sync/atomic"
)

// notifier wakes a waiting consumer after a producer commits, for the
// stores that have no wait of their own (bbolt, wal, Pebble): this is what
// a program using them as a queue builds, and it avoids polling.
type notifier struct {
	armed atomic.Bool
	mu    sync.Mutex
	ch    chan struct{}
}

// arm returns a channel closed by the next fire. Call it before checking
// for data, then wait on it if there was none.
func (n *notifier) arm() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	n.armed.Store(true)
	return n.ch
}

// fire wakes the armed waiter, if any; it costs one atomic load otherwise.
func (n *notifier) fire() {
	if !n.armed.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.armed.Store(false)
}
