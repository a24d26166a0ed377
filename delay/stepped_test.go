package delay

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TestSteppedSettleRunsOnTheCaller: stepped services start no delivery
// loop; Settle runs the pass itself, returns a failure of the pass (the
// timer queue cannot be opened) instead of retrying it in the background,
// and is ErrClosed once the service stopped.
func TestSteppedSettleRunsOnTheCaller(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/cfg", 0o700))
	cfg := Config{FS: fs, ConfigDir: "/cfg", TimerDir: "/timer", Levels: []time.Duration{time.Second},
		Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler), Stepped: true}
	h := &flushHost{}
	d, err := NewScheduler(h, cfg)
	require.NoError(t, err)
	tm, err := NewTimers(h, cfg)
	require.NoError(t, err)
	d.Start()
	tm.Start()
	require.NoError(t, d.Settle(ctx)) // its one level's queue cannot open: left out, logged
	err = tm.Settle(ctx)
	require.ErrorContains(t, err, "no queues")
	require.NoError(t, d.Stop())
	tm.Stop()
	require.ErrorIs(t, d.Settle(ctx), errs.ErrClosed)
	require.ErrorIs(t, tm.Settle(ctx), errs.ErrClosed)
}
