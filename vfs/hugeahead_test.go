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

// TestHugeAhead checks that HugeAhead calls a writer fast once it
// covers a step fast enough to fill a huge folio within hugeFillTime
// without advising the file it writes, that a new file for a fast writer
// has huge pages and no read-ahead throughout, that a writer turning slow
// there gets single pages from where it is, read-ahead back after Done,
// and that a mapping that cannot (memory) is left alone.
func TestHugeAhead(t *testing.T) {
	if !procio.HugePagesOffered() {
		t.Skip("no transparent huge pages here")
	}
	const size = 8 << 20
	path, m := mapNew(t, OS, size)
	defer m.Unmap()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.Bytes())))
	h := NewHugeAhead(m, 0, false)
	t0 := time.Unix(1000, 0)
	h.check(hugeStep, t0)
	if h.On() {
		t.Fatal("fast after a first check, with no rate known")
	}
	// 64 KiB in 10 ms is 6.4 MiB a second: fast, for the next file.
	h.check(2*hugeStep, t0.Add(10*time.Millisecond))
	if !h.On() {
		t.Fatal("a writer at 6.4 MiB a second is not fast")
	}
	if got := hugeRanges(t, path, base); len(got) != 0 {
		t.Fatalf("huge ranges %v in the file being written, want none", got)
	}
	if got := flagRanges(t, path, base, "rr"); len(got) != 0 {
		t.Fatalf("no read-ahead in %v of the file being written, want none", got)
	}
	h.Done() // nothing was advised: nothing to undo

	// The next file starts on huge pages, without read-ahead.
	path2, m2 := mapNew(t, OS, size)
	defer m2.Unmap()
	base2 := uintptr(unsafe.Pointer(unsafe.SliceData(m2.Bytes())))
	h2 := NewHugeAhead(m2, 0, h.On())
	if got, want := hugeRanges(t, path2, base2), [][2]int{{0, size}}; !h2.On() || !slices.Equal(got, want) {
		t.Fatalf("a fast writer's new file: on %t, huge ranges %v, want %v", h2.On(), got, want)
	}
	if got, want := flagRanges(t, path2, base2, "rr"), [][2]int{{0, size}}; !slices.Equal(got, want) {
		t.Fatalf("no read-ahead in %v, want %v", got, want)
	}
	t1 := h2.at
	// 4 MiB in 3 s: under the fast rate, above a quarter of it: kept.
	p := 2*hugeFolio + hugeStep
	h2.check(p, t1.Add(3*time.Second))
	if !h2.On() {
		t.Fatal("a writer within the hysteresis lost huge pages")
	}
	// 64 KiB in a second: slow, single pages from here on.
	slow := p + hugeStep + 100
	h2.check(slow, t1.Add(4*time.Second))
	if h2.On() {
		t.Fatal("a slow writer kept huge pages")
	}
	if got, want := hugeRanges(t, path2, base2), [][2]int{{0, slow &^ (PageSize - 1)}}; !slices.Equal(got, want) {
		t.Fatalf("huge ranges %v, want %v", got, want)
	}
	if want := 2*hugeFolio + 3*hugeStep; h2.next != want {
		t.Fatalf("next check at %d, want the next step boundary %d", h2.next, want)
	}
	// Wrote below the next check does nothing.
	h2.Wrote(h2.next - 1)
	if h2.at != t1.Add(4*time.Second) {
		t.Fatal("Wrote below the next check checked")
	}
	// Fast again: for the next file; this one keeps single pages.
	h2.check(h2.next, t1.Add(4*time.Second+time.Millisecond))
	if !h2.On() {
		t.Fatal("a writer fast again is not fast")
	}
	if got, want := hugeRanges(t, path2, base2), [][2]int{{0, slow &^ (PageSize - 1)}}; !slices.Equal(got, want) {
		t.Fatalf("huge ranges %v, want %v", got, want)
	}
	h2.Done()
	if got := flagRanges(t, path2, base2, "rr"); len(got) != 0 {
		t.Fatalf("no read-ahead in %v after Done", got)
	}
	// Memory offers no HugeRanger: a HugeAhead that does nothing.
	hm := NewHugeAhead(mapInMem(t), 0, true)
	if hm.On() {
		t.Fatal("an in-memory mapping got huge pages")
	}
	hm.Wrote(1 << 30) // no panic, no effect
	hm.Done()
}
