// Package leakcheck fails a test binary that leaves mqlite goroutines
// running after its tests: every Store, handle and service must stop its
// goroutines on Close.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests, then checks for leaked goroutines. Use it as
// func TestMain(m *testing.M) { leakcheck.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitLeaks(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// waitLeaks returns the stacks of mqlite goroutines still alive once the
// deadline passes, or "" as soon as none is left. Goroutines that are
// finishing their exit may need a moment to be scheduled, hence the retry.
func waitLeaks(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		leaked := leakedStacks()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}

func leakedStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "github.com/mqlite/mqlite") || strings.Contains(g, "leakcheck.leakedStacks") ||
			strings.Contains(g, "testing.(*M).") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}
