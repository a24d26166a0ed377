package vfs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The wrappers keep the order of the file system they wrap: a store on
// a strict (or Windows) file system unmaps before it removes, whatever
// wraps it.
func TestWrappersKeepUnmapFirst(t *testing.T) {
	strict := NewStrictMapFS(NewMem())
	for name, fs := range map[string]FS{
		"modes":    WithModes(strict, 0o600),
		"faulty":   NewFaulty(strict),
		"readonly": ReadOnly(strict),
		"nested":   WithModes(NewFaulty(strict), 0o640),
	} {
		require.True(t, MustUnmapFirst(fs), name)
	}
	require.False(t, MustUnmapFirst(WithModes(NewFaulty(NewMem()), 0o600)))
}
