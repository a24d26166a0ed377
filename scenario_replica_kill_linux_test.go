//go:build linux

package mqlite

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var replCycles = flag.Int("repl.cycles", 5, "kill -9 cycles of TestReplicationSyncSurvivesPrimaryKill (CI: 50)")

const (
	replAddrEnv = "MQLITE_REPL_ADDR"
	replModeEnv = "MQLITE_REPL_MODE" // "sync" or "async"
)

func killReplOpts(role Role, mode ReplicationMode) *Options {
	return &Options{Role: role, SegmentSize: 64 << 10, ConsumeQueueEntries: 4096, IndexSlots: 1024, IndexEntries: 8192,
		Replication: ReplicationOptions{Mode: mode, Timeout: 30 * time.Second}}
}

func envMode() ReplicationMode {
	if os.Getenv(replModeEnv) == "async" {
		return ReplicationAsync
	}
	return ReplicationSync
}

// TestReplicationSyncSurvivesPrimaryKill runs a ReplicationSync primary
// and its replica in two child processes over TCP on 127.0.0.1, SIGKILLs
// the primary after a random number of acknowledged sends, promotes the
// replica, and checks that every acknowledged send is on it.
func TestReplicationSyncSurvivesPrimaryKill(t *testing.T) { replKillCycles(t, "sync") }

// TestReplicationAsyncLosesOnlyTheTail is the same with ReplicationAsync:
// acknowledged sends may be missing on the promoted replica, but only a
// tail (none below the replica's end), and the replica reports how far
// behind the primary it was when the stream broke.
func TestReplicationAsyncLosesOnlyTheTail(t *testing.T) { replKillCycles(t, "async") }

func replKillCycles(t *testing.T, mode string) {
	if testing.Short() {
		t.Skip("child processes")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 39))
	for cycle := range *replCycles {
		base := t.TempDir()
		pdir, rdir := filepath.Join(base, "p"), filepath.Join(base, "r")
		p, err := startChild(t, "TestReplKillPrimaryChild", pdir, nil, replModeEnv+"="+mode)
		require.NoError(t, err)
		addr := p.expect("addr")[0]
		r, err := startChild(t, "TestReplKillReplicaChild", rdir, nil, replAddrEnv+"="+addr, replModeEnv+"="+mode)
		require.NoError(t, err)
		p.expect("ready")
		want := 1 + rng.IntN(300)
		acked := map[int64]string{}
		record := func(f []string) {
			off, err1 := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err1)
			acked[off] = f[1]
		}
		for len(acked) < want {
			record(p.expect("ack"))
		}
		for _, line := range p.kill() {
			var off int64
			var body string
			if _, err := fmt.Sscanf(line, "ack %d %s", &off, &body); err == nil {
				acked[off] = body
			}
		}
		ended := r.expect("ended")
		r.wait()
		rEnd, err1 := strconv.ParseInt(ended[0], 10, 64)
		require.NoError(t, err1)
		pEnd, err1 := strconv.ParseInt(ended[1], 10, 64)
		require.NoError(t, err1)
		require.GreaterOrEqual(t, pEnd, rEnd, "the replica reports its lag")

		s, err := Open(rdir, killReplOpts(Replica, ReplicationAsync))
		require.NoError(t, err, "cycle %d (seed %d)", cycle, seed)
		require.Equal(t, rEnd, s.log.WrotePosition())
		require.NoError(t, s.Promote())
		missing := 0
		for off, body := range acked {
			m, err := s.ReadAt(off)
			if mode == "async" && off >= rEnd {
				require.ErrorIs(t, err, ErrNotFound)
				missing++
				continue
			}
			require.NoError(t, err, "cycle %d (seed %d): acknowledged send at %d missing (replica end %d)", cycle, seed, off, rEnd)
			require.Equal(t, body, string(m.Body), "cycle %d (seed %d)", cycle, seed)
		}
		rep, err := s.Verify(context.Background(), nil)
		require.NoError(t, err)
		require.True(t, rep.OK, "%+v", rep)
		require.NoError(t, s.Close())
		t.Logf("cycle %d: %d acknowledged sends, %d of them in the tail the replica missed (%d bytes behind when the stream broke)",
			cycle, len(acked), missing, pEnd-rEnd)
	}
}

// TestReplKillPrimaryChild is the primary: it serves one replica over TCP
// and sends until killed, printing each acknowledged send.
func TestReplKillPrimaryChild(t *testing.T) {
	dir := childDir(t, "TestReplKillPrimaryChild")
	s, err := Open(dir, killReplOpts(Primary, envMode()))
	if err != nil {
		childFail(t, "open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		childFail(t, "listen: %v", err)
	}
	emit("addr %s", ln.Addr())
	conn, err := ln.Accept()
	if err != nil {
		childFail(t, "accept: %v", err)
	}
	ctx := context.Background()
	go s.ServeReplica(ctx, conn)
	if err := s.WaitReplicated(ctx, 0, 1); err != nil {
		childFail(t, "wait for the replica: %v", err)
	}
	emit("ready")
	for i := 0; ; i++ {
		body := fmt.Sprintf("m-%d", i)
		res, err := s.Put(ctx, &Message{Topic: "t", Keys: []string{body}, Body: []byte(body)}, i%4)
		if err != nil {
			childFail(t, "put %d: %v", i, err)
		}
		emit("ack %d %s", res.Offset, body)
	}
}

// TestReplKillReplicaChild is the replica: it follows the primary until
// the stream ends, then closes its store.
func TestReplKillReplicaChild(t *testing.T) {
	dir := childDir(t, "TestReplKillReplicaChild")
	s, err := Open(dir, killReplOpts(Replica, envMode()))
	if err != nil {
		childFail(t, "open: %v", err)
	}
	conn, err := net.Dial("tcp", os.Getenv(replAddrEnv))
	if err != nil {
		childFail(t, "dial: %v", err)
	}
	err = s.ReplicateFrom(context.Background(), conn)
	st := s.ReplicationStatus()
	emit("ended %d %d %v", st.End, st.PrimaryEnd, err)
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
}
