package commitlog

import (
	"testing"

	"github.com/mqlite/mqlite/internal/vfs"
)

// Warming starts at the write position: at Open, and whenever the warmer
// lags, it does not fault in the older segments on its way there.
func TestWarmStartsAtTheWritePosition(t *testing.T) {
	const seg, warm = 64 << 10, 16 << 10
	l, err := Open(Options{Dir: "/cl", FS: vfs.NewMem(), SegmentSize: seg, WarmBytes: warm, RecoverFrom: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := bytesAppender(payload(1, 1000))
	for l.WrotePosition() < 3*seg+seg/2 {
		if _, err := l.Append(a); err != nil {
			t.Fatal(err)
		}
	}
	to := l.warmTo.Load()
	if to <= l.WrotePosition() || to > l.WrotePosition()+warm {
		t.Fatalf("warm target %d, write position %d: want within WarmBytes ahead", to, l.WrotePosition())
	}
	var done int64 // a warmer that has done nothing yet
	more := l.warmAhead(&done)
	if done < 3*seg || done > to {
		t.Fatalf("first warmed chunk ends at %d: want in the write segment [%d, %d), up to the target %d", done, 3*seg, 4*seg, to)
	}
	for more {
		more = l.warmAhead(&done)
	}
	if done != to {
		t.Fatalf("warmed up to %d, want the target %d", done, to)
	}
	l.warmTo.Store(6 * seg) // asked at 6*seg-warm: a segment not rolled to yet
	if l.warmAhead(&done) || done != to {
		t.Fatalf("warmed up to %d for a target past the last segment, want nothing done (%d)", done, to)
	}
}
