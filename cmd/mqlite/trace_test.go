package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
)

// TestTraceCommand: `mqlite trace ID` prints a traced message's life, as
// text and as JSON, read-only beside nothing; an unknown ID and a store
// without the trace exit 1, a bad ID 2.
func TestTraceCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := mqlite.Open(dir, &mqlite.Options{MessageTrace: true, SegmentSize: 1 << 20, NoWarm: true})
	require.NoError(t, err)
	ctx := context.Background()
	r, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("x")}, 0)
	require.NoError(t, err)
	pc, err := s.NewPullConsumer("billing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	got, err := pc.Poll(ctx, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, pc.Close())
	require.NoError(t, s.Close())

	out, stderr, code := runTool(t, "-dir", dir, "trace", r.MsgID())
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Contains(t, lines[0], "stored")
	require.Contains(t, lines[1], "sent")
	require.Contains(t, lines[2], "delivered")
	require.Contains(t, lines[2], "group=billing")

	ro, stderr, code := runTool(t, "-dir", dir, "-readonly", "trace", r.MsgID())
	require.Equal(t, 0, code, stderr)
	require.Equal(t, out, ro, "the same read-only")

	out, stderr, code = runTool(t, "-dir", dir, "-json", "trace", r.MsgID())
	require.Equal(t, 0, code, stderr)
	var evs []mqlite.TraceEvent
	require.NoError(t, json.Unmarshal([]byte(out), &evs))
	require.Len(t, evs, 3)
	require.Equal(t, mqlite.TraceDelivered, evs[2].Type)
	require.True(t, evs[2].Pull)

	_, _, code = runTool(t, "-dir", dir, "trace", "00000000000FFFFF")
	require.Equal(t, exitProblem, code)
	_, _, code = runTool(t, "-dir", dir, "trace", "zz")
	require.Equal(t, exitUsage, code)
}
