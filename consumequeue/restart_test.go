package consumequeue

import (
	"errors"
	"testing"
)

// Restart moves an empty queue on, in memory and across a reopen, inside
// a file and at a file boundary; the next Append is at the new end, and
// what reads and retention see is a queue whose entries all went.
func TestRestart(t *testing.T) {
	for _, next := range []int64{37, 32} {
		modes(t, func(t *testing.T, e env) {
			q := mustOpen(t, e.opts())
			appendRange(t, q, 0, 5)
			if _, err := q.DeleteBelowPhys(entryFor(5).Offset); err != nil {
				t.Fatal(err)
			}
			if err := q.Restart(next); err != nil {
				t.Fatalf("Restart(%d): %v", next, err)
			}
			checkRange(t, q, next, next)
			equal(t, "files", dataFiles(t, e.fs, e.dir), []string{fileName(32 * EntrySize)})
			if err := q.Restart(next); err != nil {
				t.Fatalf("Restart at the end again: %v", err)
			}
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			closeQ(t, q)

			q = mustOpen(t, e.opts())
			checkRange(t, q, next, next)
			if err := q.TruncateAfterPhys(entryFor(100).Offset); err != nil {
				t.Fatal(err)
			}
			if _, err := q.DeleteBelowPhys(entryFor(next).Offset); err != nil {
				t.Fatal(err)
			}
			checkRange(t, q, next, next)
			if err := q.Append(next-1, entryFor(next-1)); err != nil {
				t.Fatalf("re-dispatch below the restart: %v", err)
			}
			checkRange(t, q, next, next)
			appendRange(t, q, next, next+20)
			checkRange(t, q, next, next+20)
			closeQ(t, q)
			q = mustOpen(t, e.opts())
			defer closeQ(t, q)
			checkRange(t, q, next, next+20)
		})
	}
}

// Restart refuses a queue that holds entries and an offset below its end,
// and changes nothing when it does.
func TestRestartErrors(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 5)
		if err := q.Restart(40); !errors.Is(err, ErrConflict) {
			t.Fatalf("Restart of a queue with entries: %v, want ErrConflict", err)
		}
		checkRange(t, q, 0, 5)
		if _, err := q.DeleteBelowPhys(entryFor(5).Offset); err != nil {
			t.Fatal(err)
		}
		if err := q.Restart(4); !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrConflict) {
			t.Fatalf("Restart below the end: %v, want ErrInvalidArgument", err)
		}
		checkRange(t, q, 5, 5)
		closeQ(t, q)
		if err := q.Restart(40); !errors.Is(err, ErrClosed) {
			t.Fatalf("Restart after Close: %v, want ErrClosed", err)
		}
	})
}
