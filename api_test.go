package mqlite

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api/*.txt from the exported API")

// apiPackages are the packages whose exported API is kept in
// testdata/api, so that a change to it is deliberate: a removal or a
// changed signature fails TestExportedAPI until the list is rewritten
// with -update-api (and the change noted in CHANGELOG.md).
var apiPackages = []string{".", "commitlog", "consumequeue", "indexfile", "consumer", "producer", "message", "txn", "topic", "filter", "clock", "flush", "delay", "hook", "dashboard"}

func TestExportedAPI(t *testing.T) {
	for _, dir := range apiPackages {
		got := exportedAPI(t, dir)
		name := strings.ReplaceAll(filepath.Clean(dir), "/", "_")
		if name == "." {
			name = "mqlite"
		}
		path := filepath.Join("testdata", "api", name+".txt")
		if *updateAPI {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "no API list for %s: run go test -run TestExportedAPI -update-api", dir)
		require.Equal(t, string(want), got, "the exported API of %s changed: if that is meant, rerun with -update-api and say so in CHANGELOG.md", dir)
	}
}

// exportedAPI lists the exported declarations of the package in dir (test
// files and other build tags' files aside), one a line, sorted: funcs and
// methods with their signatures, types with their exported fields and
// interface methods, constants and variables by name.
func exportedAPI(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var lines []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") ||
			strings.Contains(n, "_windows") || strings.Contains(n, "_darwin") ||
			strings.Contains(n, "_bsd") || strings.Contains(n, "_freebsd") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			lines = append(lines, declAPI(fset, d)...)
		}
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	return strings.Join(lines, "\n") + "\n"
}

func declAPI(fset *token.FileSet, d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		recv := ""
		if d.Recv != nil && len(d.Recv.List) > 0 {
			r := exprString(fset, d.Recv.List[0].Type)
			if !ast.IsExported(strings.TrimLeft(strings.SplitN(r, "[", 2)[0], "*")) {
				return nil
			}
			recv = "(" + r + ") "
		}
		out = append(out, "func "+recv+d.Name.Name+strings.TrimPrefix(exprString(fset, d.Type), "func"))
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				out = append(out, typeAPI(fset, s)...)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, fmt.Sprintf("%s %s", d.Tok, n.Name))
					}
				}
			}
		}
	}
	return out
}

func typeAPI(fset *token.FileSet, s *ast.TypeSpec) []string {
	name := "type " + s.Name.Name
	if s.Assign.IsValid() {
		return []string{name + " = " + exprString(fset, s.Type)}
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		out := []string{name + " struct"}
		for _, f := range t.Fields.List {
			typ := exprString(fset, f.Type)
			if len(f.Names) == 0 { // embedded
				if ast.IsExported(strings.TrimLeft(typ, "*")) || strings.Contains(typ, ".") {
					out = append(out, name+" embeds "+typ)
				}
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, fmt.Sprintf("%s.%s %s", name, n.Name, typ))
				}
			}
		}
		return out
	case *ast.InterfaceType:
		out := []string{name + " interface"}
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					out = append(out, fmt.Sprintf("%s.%s%s", name, n.Name, strings.TrimPrefix(exprString(fset, m.Type), "func")))
				}
			}
			if len(m.Names) == 0 {
				out = append(out, name+" embeds "+exprString(fset, m.Type))
			}
		}
		return out
	}
	return []string{name + " " + exprString(fset, s.Type)}
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	if err := printer.Fprint(&b, fset, e); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
