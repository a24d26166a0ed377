package main

import (
	"fmt"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/message"
)

// runTrace prints the life of a message from the store's message trace
// (a store opened with Options.MessageTrace).
func runTrace(e *env, args []string) int {
	id := args[0]
	if _, err := message.ParseID(id); err != nil {
		return e.usageErr("%q is not a message ID: it %s (an ID is the 16 upper-case hex digits Put and Send return)", id, idProblem(id, err))
	}
	return e.withStore(func(s *mqlite.Store) int {
		evs, err := s.Trace(id)
		if err != nil {
			return e.fail(exitProblem, "trace of "+id, err)
		}
		if e.json {
			return e.printJSON(evs)
		}
		for _, ev := range evs {
			fmt.Fprintln(e.stdout, ev.String())
		}
		return exitOK
	})
}
