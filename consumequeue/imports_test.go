package consumequeue

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces that the package stays usable alone: standard
// library plus mqlite's file seam (vfs) and sentinels, never the root
// package or commitlog.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"github.com/mqlite/mqlite/vfs":           true,
		"github.com/mqlite/mqlite/internal/errs": true,
	}
	names, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range names {
		name := de.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			if !std && !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
