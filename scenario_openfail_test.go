//go:build linux

package mqlite

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/consumer"
)

// An Open that fails after the indexes are up (here a damaged consumer
// offsets file) stops the dispatcher and the flusher it had started and
// unmaps every file: nothing of it keeps running.
func TestFailedOpenStopsEverything(t *testing.T) {
	for _, flush := range []FlushMode{FlushAsync, FlushSync} {
		dir := filepath.Join(t.TempDir(), "store")
		o := &Options{Flush: flush, SegmentSize: 16 << 10, ConsumeQueueEntries: 64}
		s, err := Open(dir, o)
		require.NoError(t, err)
		require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
		_, err = s.Put(t.Context(), &Message{Topic: "t", Body: []byte("x")}, 0)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config", consumer.OffsetsFile), []byte("not an offsets file"), 0o644))
		fds := openFDs(t)
		_, err = Open(dir, o)
		require.ErrorIs(t, err, ErrCorrupt, flush)
		require.Zero(t, mqliteGoroutines(), "%s: goroutines left by the failed Open", flush)
		require.Zero(t, mappingsUnder(t, dir), flush)
		require.Equal(t, fds, openFDs(t), flush)
	}
}
