package delay

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// flushHost is a Host that only counts flushes (and fails them on demand).
type flushHost struct {
	flushes  int
	flushErr error
}

func (h *flushHost) Queue(string, int, bool) (*consumequeue.Queue, error) {
	return nil, errors.New("no queues")
}
func (h *flushHost) ReadAt(int64) (*message.MessageExt, error)       { return nil, errors.New("no log") }
func (h *flushHost) Deliver(*message.MessageExt, bool, string) error { return nil }
func (h *flushHost) Flush() error                                    { h.flushes++; return h.flushErr }
func (h *flushHost) Indexed(<-chan struct{}) bool                    { return true }
func (h *flushHost) WaitCh(*consumequeue.Queue, int64) (<-chan struct{}, error) {
	return nil, errors.New("closed")
}
func (h *flushHost) LogEnd() int64 { return 0 }

// TestSaveFlushesBeforeItClaimsProgress: the progress file says messages
// were delivered, so their deliveries are made durable (Host.Flush, which
// also wakes the dispatcher) before it is written; a failed flush writes
// nothing, and a save with nothing new flushes nothing.
func TestSaveFlushesBeforeItClaimsProgress(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/cfg", 0o700))
	h := &flushHost{}
	cfg := Config{FS: fs, ConfigDir: "/cfg", Levels: []time.Duration{time.Second}, Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)}
	d, err := NewScheduler(h, cfg)
	require.NoError(t, err)

	require.NoError(t, d.Save())
	require.Zero(t, h.flushes, "nothing to save")

	h.flushErr = errors.New("disk gone")
	d.progress["1"] = 7
	require.ErrorIs(t, d.Save(), h.flushErr)
	p, err := LoadProgress(fs, "/cfg")
	require.NoError(t, err)
	require.Empty(t, p, "written before its deliveries were durable")

	h.flushErr = nil
	require.NoError(t, d.Save())
	require.Equal(t, 2, h.flushes)
	p, err = LoadProgress(fs, "/cfg")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"1": 7}, p)
}
