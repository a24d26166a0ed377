package consumequeue

import (
	"testing"
)

// flipEntry damages the entry at logical offset i of the queue in e.
func flipEntry(t *testing.T, e env, i int64) {
	t.Helper()
	path := e.file(i - i%testPerFile)
	b := readFile(t, e.fs, path)
	b[(i%testPerFile)*EntrySize+3] ^= 0x10
	writeFile(t, e.fs, path, b)
}

// TestTruncateChecksTheNextWindow: Open scans the newest three files
// entry by entry and trusts the older ones. TruncateAfterPhys that leaves
// fewer files moves the next Open's window back over trusted files; a
// damaged entry there is dropped now (with the entries after it, marked
// repaired for re-dispatch), as the next Open would drop it, and that
// Open then finds what this one left.
func TestTruncateChecksTheNextWindow(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		// Files 0 to 6 (112 entries); the window is files 4 to 6, and
		// entry 40 (file 2) is damaged.
		q := damaged(t, e, 7*testPerFile, func() { flipEntry(t, e, 40) })
		equal(t, "repaired at Open", q.Repaired(), false)
		equal(t, "max at Open", q.MaxOffset(), int64(7*testPerFile))
		if _, err := q.Get(40); err == nil {
			t.Fatal("the damaged entry reads")
		}
		// Keep entries 0 to 59: files 0 to 3, whose window (1 to 3)
		// holds the damaged entry.
		if err := q.TruncateAfterPhys(entryFor(59).End()); err != nil {
			t.Fatal(err)
		}
		equal(t, "repaired", q.Repaired(), true)
		checkRange(t, q, 0, 40)
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		equal(t, "repaired at the next Open", q.Repaired(), false)
		checkRange(t, q, 0, 40)
	})
}

// TestTruncateWithoutDamageKeepsTheRest: the same truncation over intact
// files keeps every entry that fits and repairs nothing.
func TestTruncateWithoutDamageKeepsTheRest(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := damaged(t, e, 7*testPerFile, func() {})
		defer closeQ(t, q)
		if err := q.TruncateAfterPhys(entryFor(59).End()); err != nil {
			t.Fatal(err)
		}
		equal(t, "repaired", q.Repaired(), false)
		checkRange(t, q, 0, 60)
	})
}

// TestRecoveryChecksTheNextWindow: a damaged entry in the window ends the
// queue there, and the files after it go; the next Open's window then
// reaches back over trusted files, which this Open checks too.
func TestRecoveryChecksTheNextWindow(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		// Window: files 4 to 6. Entry 64 (the first of file 4) is damaged,
		// which leaves files 0 to 3; their next window, files 1 to 3,
		// holds the damaged entry 20.
		q := damaged(t, e, 7*testPerFile, func() {
			flipEntry(t, e, 64)
			flipEntry(t, e, 20)
		})
		equal(t, "repaired", q.Repaired(), true)
		checkRange(t, q, 0, 20)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		equal(t, "repaired at the next Open", q.Repaired(), false)
		checkRange(t, q, 0, 20)
	})
}

// TestRetentionSearchSkipsDamage: DeleteBelowPhys's search for the first
// entry to keep takes a damaged entry as the next valid one after it: a
// damaged entry it probed no longer takes the entries before it out of
// the queue, and the answer does not depend on the queue's end.
func TestRetentionSearchSkipsDamage(t *testing.T) {
	for _, c := range []struct {
		name    string
		damaged []int64
		minPhys int64
		wantMin int64
	}{
		// The search over [0, 112) probes 56, 28, 14, 7, 3, 1.
		{"nothing below", []int64{1}, 0, 0},
		{"nothing below, several damaged", []int64{1, 3, 7}, 0, 0},
		{"keep from 10", []int64{1, 3, 7}, entryFor(10).Offset, 10},
		// The damaged entry 9 goes as entry 10 does: it stays.
		{"keep from 10, 9 damaged", []int64{9}, entryFor(10).Offset, 9},
		{"keep from 10, 10 damaged", []int64{10}, entryFor(10).Offset, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			modes(t, func(t *testing.T, e env) {
				q := damaged(t, e, 7*testPerFile, func() {
					for _, i := range c.damaged {
						flipEntry(t, e, i)
					}
				})
				defer closeQ(t, q)
				if _, err := q.DeleteBelowPhys(c.minPhys); err != nil {
					t.Fatal(err)
				}
				equal(t, "min", q.MinOffset(), c.wantMin)
				equal(t, "max", q.MaxOffset(), int64(7*testPerFile))
			})
		})
	}
}

// TestMetaWithoutDataFilesIsRepaired: the first data file is never
// removed, so a queue directory with a meta file and none is a lost file:
// Open marks the queue repaired (re-dispatch from its start rebuilds it).
// A new queue is not.
func TestMetaWithoutDataFilesIsRepaired(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		equal(t, "new queue repaired", q.Repaired(), false)
		appendRange(t, q, 0, 5)
		closeQ(t, q)
		if err := e.fs.Remove(e.file(0)); err != nil {
			t.Fatal(err)
		}
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		equal(t, "repaired", q.Repaired(), true)
		checkRange(t, q, 0, 0)
		equal(t, "MaxPhysEnd", q.MaxPhysEnd(), int64(0))
	})
}
