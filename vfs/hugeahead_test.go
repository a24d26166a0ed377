//go:build linux

package vfs

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mqlite/mqlite/internal/procio"
)

// hugeRanges returns the ranges (offsets into the mapping at base) of
// path's mappings in /proc/self/smaps that carry the huge-page flag
// ("hg"), merged where adjacent.
func hugeRanges(t *testing.T, path string, base uintptr) [][2]int {
	return flagRanges(t, path, base, "hg")
}

// flagRanges is hugeRanges for any VmFlags flag.
func flagRanges(t *testing.T, path string, base uintptr, flag string) [][2]int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	var out [][2]int
	var lo, hi uintptr
	mine := false
	for l := range strings.Lines(string(smaps)) {
		l = strings.TrimSpace(l)
		if f := strings.Fields(l); len(f) >= 6 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			mine = f[len(f)-1] == path
			a, b, _ := strings.Cut(f[0], "-")
			x, _ := strconv.ParseUint(a, 16, 64)
			y, _ := strconv.ParseUint(b, 16, 64)
			lo, hi = uintptr(x), uintptr(y)
			continue
		}
		if v, ok := strings.CutPrefix(l, "VmFlags:"); ok && mine && slices.Contains(strings.Fields(v), flag) {
			r := [2]int{int(lo - base), int(hi - base)}
			if n := len(out); n > 0 && out[n-1][1] == r[0] {
				out[n-1][1] = r[1]
			} else {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestHugeAhead checks that HugeAhead gives the rest of a mapping huge
// pages once its writer covers a step fast enough to fill a huge folio
// within hugeFillTime, takes them away from where a slow writer is, and
// that a mapping that cannot (memory) is left alone.
func TestHugeAhead(t *testing.T) {
	if !procio.HugePagesOffered() {
		t.Skip("no transparent huge pages here")
	}
	const size = 16 << 20
	path, m := mapNew(t, OS, size)
	defer m.Unmap()
	b := m.Bytes()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	h := NewHugeAhead(m, 0, false)
	if h.On() || len(hugeRanges(t, path, base)) != 0 {
		t.Fatal("a new HugeAhead starts with huge pages")
	}
	t0 := time.Unix(1000, 0)
	// Fast: 64 KiB in 10 ms is 6.4 MiB a second.
	h.check(hugeStep, t0)
	if h.On() {
		t.Fatal("huge pages after a first check, with no rate known")
	}
	h.check(2*hugeStep, t0.Add(10*time.Millisecond))
	if !h.On() {
		t.Fatal("a writer at 6.4 MiB a second did not get huge pages")
	}
	if got, want := hugeRanges(t, path, base), [][2]int{{2 * hugeStep, size}}; !slices.Equal(got, want) {
		t.Fatalf("huge ranges %v, want %v", got, want)
	}
	// 1 MiB a second: under the fast rate, above a quarter of it: kept.
	h.check(3*hugeStep, t0.Add(70*time.Millisecond))
	if !h.On() {
		t.Fatal("a writer within the hysteresis lost huge pages")
	}
	// 64 KiB in a second: slow, single pages from here on.
	h.check(4*hugeStep+100, t0.Add(1070*time.Millisecond))
	if h.On() {
		t.Fatal("a slow writer kept huge pages")
	}
	if got, want := hugeRanges(t, path, base), [][2]int{{2 * hugeStep, 4 * hugeStep}}; !slices.Equal(got, want) {
		t.Fatalf("huge ranges %v, want %v", got, want)
	}
	if h.next != 5*hugeStep {
		t.Fatalf("next check at %d, want the next step boundary %d", h.next, 5*hugeStep)
	}
	// Read-ahead is off from the first check on, and back after Done.
	if got := flagRanges(t, path, base, "rr"); !slices.Equal(got, [][2]int{{hugeStep, size}}) {
		t.Fatalf("no read-ahead in %v, want from the first check on", got)
	}
	// Wrote below the next check does nothing.
	h.Wrote(5*hugeStep - 1)
	if h.at != t0.Add(1070*time.Millisecond) {
		t.Fatal("Wrote below the next check checked")
	}
	h.Done()
	if got := flagRanges(t, path, base, "rr"); len(got) != 0 {
		t.Fatalf("no read-ahead in %v after Done", got)
	}
	if got, want := hugeRanges(t, path, base), [][2]int{{2 * hugeStep, 4 * hugeStep}}; !slices.Equal(got, want) {
		t.Fatalf("huge ranges %v after Done, want %v", got, want)
	}
	// A new file for a writer known to be fast starts on huge pages.
	path2, m2 := mapNew(t, OS, 4<<20)
	defer m2.Unmap()
	h2 := NewHugeAhead(m2, 4096, true)
	if got, want := hugeRanges(t, path2, uintptr(unsafe.Pointer(unsafe.SliceData(m2.Bytes())))), [][2]int{{4096, 4 << 20}}; !h2.On() || !slices.Equal(got, want) {
		t.Fatalf("a fast writer's new file: on %t, huge ranges %v, want %v", h2.On(), got, want)
	}
	// Memory offers no HugeRanger: a HugeAhead that does nothing.
	hm := NewHugeAhead(mapInMem(t), 0, true)
	if hm.On() {
		t.Fatal("an in-memory mapping got huge pages")
	}
	hm.Wrote(1 << 30) // no panic, no effect
}
