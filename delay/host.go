package delay

import (
	"log/slog"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// Host is what the delay services need from the message store; the root
// package implements it.
type Host interface {
	// Queue returns queue id of a system topic (the schedule or the timer
	// topic), creating its files when create is true.
	Queue(topic string, id int, create bool) (*consumequeue.Queue, error)
	// ReadAt returns the message at a CommitLog offset (errs.ErrNotFound:
	// removed by retention).
	ReadAt(offset int64) (*message.MessageExt, error)
	// Deliver stores a due delayed or timer message (kind: "delayed" or
	// "timer", for logs) in its real topic and queue; verify skips one the
	// index shows was delivered before a restart.
	Deliver(m *message.MessageExt, verify bool, kind string) error
	// Flush makes every record appended so far durable and wakes the
	// dispatcher, which may be waiting for durable records.
	Flush() error
	// Indexed waits until the CommitLog as of now is dispatched; false
	// when quit closes or the store stops.
	Indexed(quit <-chan struct{}) bool
	// WaitCh returns a channel closed once q has an entry at offset (an
	// error when the store is closing).
	WaitCh(q *consumequeue.Queue, offset int64) (<-chan struct{}, error)
	// LogEnd is the CommitLog's end (its wrote position).
	LogEnd() int64
}

// Config is what both services are opened with.
type Config struct {
	// FS is the file system the store runs on.
	FS vfs.FS
	// ConfigDir is where the progress files live.
	ConfigDir string
	// TimerDir is the timer wheel's bucket directory.
	TimerDir string
	// Levels are the delay levels: level n waits Levels[n-1].
	Levels []time.Duration
	// Clock is the store's clock.
	Clock clock.Clock
	// Logger receives warnings (never nil).
	Logger *slog.Logger
	// Kicked gets a token when the dispatcher appends to the schedule
	// topic: the scheduler's wake-up.
	Kicked <-chan struct{}
	// Stepped is for deterministic tests: Start starts no delivery loop;
	// each Settle runs one pass over what is due on its caller's
	// goroutine instead (see stepped.go).
	Stepped bool
}

// queueEnd is the end of a queue (0 for one never written), for the
// services' progress checks while Open runs.
func queueEnd(h Host, name string, id int) int64 {
	q, err := h.Queue(name, id, false)
	if err != nil || q == nil {
		return 0
	}
	return q.MaxOffset()
}
