package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mqlite/mqlite"
)

// replicationRow is "replication status -json".
type replicationRow struct {
	Dir     string
	StoreID string
	Epochs  []mqlite.Epoch
	mqlite.ReplicationState
}

// runReplication is "replication status [DIR]": role, store ID, epochs,
// CommitLog end and, for a primary, each replica's acknowledged position
// and lag, from the files the store keeps (it is not opened, so it may be
// running).
func runReplication(e *env, args []string) int {
	if args[0] != "status" {
		return e.usageErr("unknown subcommand %q (want status)", args[0])
	}
	st, err := mqlite.ReadReplicationState(e.dir, nil)
	if errors.Is(err, mqlite.ErrNotFound) {
		fmt.Fprintf(e.stderr, "mqlite replication: %s never took part in replication\n", e.dir)
		return exitProblem
	}
	if err != nil {
		return e.fail(exitUsage, "read the replication state", err)
	}
	if e.json {
		return e.printJSON(replicationRow{Dir: e.dir, StoreID: st.StoreID.String(), Epochs: st.Epochs, ReplicationState: st})
	}
	eps := make([]string, len(st.Epochs))
	for i, ep := range st.Epochs {
		eps[i] = fmt.Sprintf("%d@%d", ep.Number, ep.Start)
	}
	t := newTable(e.stdout, "FIELD", "VALUE")
	t.row("role", st.Role)
	t.row("store id", st.StoreID)
	t.row("epochs", strings.Join(eps, " "))
	t.row("commitlog end", st.End)
	if st.Role == mqlite.Replica {
		t.row("primary end", st.PrimaryEnd)
		t.row("lag", max(st.PrimaryEnd-st.End, 0))
	}
	if !st.Updated.IsZero() {
		t.row("updated", st.Updated.Format("2006-01-02T15:04:05.000Z07:00"))
	}
	t.flush()
	if len(st.Replicas) > 0 {
		fmt.Fprintln(e.stdout)
		rt := newTable(e.stdout, "REPLICA", "WRITTEN", "FLUSHED", "LAG", "IN SYNC")
		for _, r := range st.Replicas {
			rt.row(r.ID, r.Written, r.Flushed, r.Lag, yesNo(r.InSync))
		}
		rt.flush()
	}
	return exitOK
}
