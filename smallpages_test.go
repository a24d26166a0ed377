package mqlite

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFlushSyncKeepsSmallPages checks that a FlushSync store writes its
// CommitLog with read-ahead off (the "rr" flag of the write segment's
// mapping in smaps), so that each group commit writes back only its own
// pages (commitlog.Options.SmallSyncs), and that a FlushAsync store keeps
// read-ahead.
func TestFlushSyncKeepsSmallPages(t *testing.T) {
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
		if got, want := slices.Contains(flags, "rr"), mode == FlushSync; got != want {
			t.Errorf("%v: read-ahead off on the write segment: %v, want %v (VmFlags %v)", mode, got, want, flags)
		}
	}
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
