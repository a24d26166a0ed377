package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/replication"
)

func TestReplicationStatus(t *testing.T) {
	base := t.TempDir()
	pdir, rdir := filepath.Join(base, "p"), filepath.Join(base, "r")
	o := &mqlite.Options{SegmentSize: 64 << 10}
	p, err := mqlite.Open(pdir, o)
	require.NoError(t, err)
	defer p.Close()
	ro := *o
	ro.Role = mqlite.Replica
	r, err := mqlite.Open(rdir, &ro)
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	res, err := p.Put(ctx, &mqlite.Message{Topic: "t", Body: []byte("x")}, 0)
	require.NoError(t, err)
	// Put before the session: its first metadata frame says where the
	// primary ends.
	stop := replication.Pipe(ctx, p, r)
	require.NoError(t, p.WaitReplicated(ctx, res.End(), 1))
	stop()

	out, errOut, code := runTool(t, "replication", "status", rdir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "Replica")
	out, errOut, code = runTool(t, "-json", "-dir", rdir, "replication", "status")
	require.Equal(t, exitOK, code, errOut)
	var row replicationRow
	require.NoError(t, json.Unmarshal([]byte(out), &row))
	require.Equal(t, mqlite.Replica, row.Role)
	require.Len(t, row.Epochs, 1)
	require.Equal(t, res.End(), row.PrimaryEnd)

	// A store that never replicated.
	plain := filepath.Join(base, "plain")
	s, err := mqlite.Open(plain, o)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, _, code = runTool(t, "replication", "status", plain)
	require.Equal(t, exitProblem, code)
	_, _, code = runTool(t, "replication", "nonsense", plain)
	require.Equal(t, exitUsage, code)
}
