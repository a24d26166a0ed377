package mqlite

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/internal/procio"
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
		v, ok := procio.SmapsField(filepath.Join(dir, "commitlog", "00000000000000000000"), "VmFlags:")
		s.Close()
		if !ok {
			t.Skip("no smaps entry for the segment")
		}
		flags := strings.Fields(v)
		small, huge := slices.Contains(flags, "rr"), slices.Contains(flags, "hg")
		if small != (mode == FlushSync) || huge == (mode == FlushSync) && procio.HugePagesOffered() {
			t.Errorf("%v: read-ahead off %v, huge pages %v (VmFlags %v)", mode, small, huge, flags)
		}
	}
}
