package main

import (
	"context"
	"fmt"

	"github.com/mqlite/mqlite"
)

// runSalvage copies the good records of the store into a new store in
// args[0] (mqlite.Salvage) and lists what was dropped: exit status 1 when
// anything was, 2 when the salvage could not run.
func runSalvage(e *env, args []string) int {
	o, err := e.options()
	if err != nil {
		return e.fail(exitUsage, "salvage "+e.dir, err)
	}
	rep, err := mqlite.Salvage(context.Background(), e.dir, args[0], o)
	if err != nil {
		return e.fail(exitUsage, "salvage "+e.dir+" into "+args[0], err)
	}
	code := exitOK
	if !rep.OK() {
		code = exitProblem
	}
	if e.json {
		if rep.Dropped == nil {
			rep.Dropped = []mqlite.DroppedRange{}
		}
		return max(code, e.printJSON(rep))
	}
	w := e.stdout
	skipped := int64(0)
	for _, n := range rep.Skipped {
		skipped += n
	}
	status := "OK"
	if !rep.OK() {
		status = "DROPPED"
	}
	t := newTable(w, "COPIED", "SKIPPED", "DROPPED", "STATUS")
	t.row(rep.Copied, skipped, len(rep.Dropped), status)
	t.flush()
	if len(rep.Dropped) > 0 {
		fmt.Fprintln(w, "\ndropped:")
		for _, d := range rep.Dropped {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	fmt.Fprintf(w, "\nnew store: %s\n", args[0])
	return code
}
