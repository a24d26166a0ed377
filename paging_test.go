package mqlite

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSegmentPaging checks how a store's write segment is paged in: a
// FlushSync store's with read-ahead off (the "rr" flag of its mapping in
// smaps), so that each group commit writes back only its own pages, and a
// FlushAsync store's for huge pages ("hg"; commitlog.Options.SmallSyncs).
func TestSegmentPaging(t *testing.T) {
	for _, mode := range []FlushMode{FlushSync, FlushAsync} {
		dir := filepath.Join(t.TempDir(), "store")
		s, err := Open(dir, &Options{Flush: mode, SegmentSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte("x")}, 0); err != nil {
			t.Fatal(err)
		}
		flags, ok := vmFlags(t, filepath.Join(dir, "commitlog", "00000000000000000000"))
		s.Close()
		if !ok {
			t.Skip("no smaps entry for the segment")
		}
		small, huge := slices.Contains(flags, "rr"), slices.Contains(flags, "hg")
		if small != (mode == FlushSync) || huge == (mode == FlushSync) && thpEnabled() {
			t.Errorf("%v: read-ahead off %v, huge pages %v (VmFlags %v)", mode, small, huge, flags)
		}
	}
}

// thpEnabled says whether the kernel offers transparent huge pages.
func thpEnabled() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && !strings.Contains(string(b), "[never]")
}

// vmFlags is the VmFlags of the mapping of path in /proc/self/smaps.
func vmFlags(t *testing.T, path string) ([]string, bool) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	in := false
	for l := range strings.SplitSeq(string(smaps), "\n") {
		switch {
		case strings.HasSuffix(l, " "+path):
			in = true
		case in && strings.HasPrefix(l, "VmFlags:"):
			return strings.Fields(strings.TrimPrefix(l, "VmFlags:")), true
		}
	}
	return nil, false
}
