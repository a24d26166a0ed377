package vfs

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// dfUsage counts as df does: a root reserve is not "used". The figures
// are this machine's (df -B1 /: size 270553174016, used 13909512192,
// avail 83883782144, Use% 15, a 172 GB reserve), where the old formula
// (used = size - avail) gave 69%, above the default ForceCleanRatio.
func TestDfUsageMatchesDf(t *testing.T) {
	size, used, avail := uint64(270553174016), uint64(13909512192), uint64(83883782144)
	free := size - used // the reserve included
	gotUsed, gotTotal := dfUsage(size, free, avail)
	require.Equal(t, used, gotUsed)
	require.Equal(t, used+avail, gotTotal)
	ratio := float64(gotUsed) / float64(gotTotal)
	require.Equal(t, 15.0, math.Ceil(ratio*100), "df's Use%%, which rounds up: %.4f", ratio)
	old := float64(size-avail) / float64(size)
	require.InDelta(t, 0.69, old, 0.01, "the old formula's figure")

	for _, c := range []struct {
		name                string
		size, free, avail   uint64
		wantUsed, wantTotal uint64
	}{
		{"no reserve", 100, 40, 40, 60, 100},
		{"empty", 100, 100, 90, 0, 90},
		{"reserve in use", 100, 3, 0, 97, 97},
		{"free past size", 100, 120, 90, 0, 90},
		{"avail past free", 100, 10, 50, 90, 100},
		{"zero volume", 0, 0, 0, 0, 0},
	} {
		u, tot := dfUsage(c.size, c.free, c.avail)
		require.Equal(t, [2]uint64{c.wantUsed, c.wantTotal}, [2]uint64{u, tot}, c.name)
	}
}

// On the real file system, Usage's ratio is df's Use% (within a point:
// files change between the two reads).
func TestOSUsageIsDfRatio(t *testing.T) {
	dir := t.TempDir()
	used, total, ok, err := Usage(OS, dir)
	if err != nil {
		t.Skipf("no volume usage here: %v", err)
	}
	require.True(t, ok)
	size, free, avail, err := statVolume(dir)
	require.NoError(t, err)
	require.Equal(t, size-free, used)
	require.Equal(t, size-free+avail, total)
	require.LessOrEqual(t, total, size)
}
