package replication_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps the package free of any dependency but
// the standard library (the root package stays free of network code; this
// one of store code).
func TestStandardLibraryOnly(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/mqlite/mqlite/replication" {
			t.Errorf("replication depends on %s", p)
		}
	}
}
