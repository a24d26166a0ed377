package indexfile

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencies keeps the package usable alone: within mqlite it may
// import only vfs and internal/errs (never the root package,
// commitlog or consumequeue).
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := []string{
		"github.com/mqlite/mqlite/indexfile",
		"github.com/mqlite/mqlite/vfs",
		"github.com/mqlite/mqlite/internal/errs",
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/mqlite/mqlite") && !slices.Contains(allowed, p) {
			t.Errorf("indexfile depends on %s", p)
		}
	}
}

func TestResultsDedupOutOfOrder(t *testing.T) {
	rs := results{max: 10}
	for _, p := range []int64{50, 50, 40, 45, 40, 30, 50, 30} { // 45, 50: damaged order
		rs.add(p)
	}
	eq(t, "dedup", rs.out, []int64{50, 40, 45, 30})
}
