package commitlog

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/mqlite/mqlite/vfs"
)

// Warming starts at the write position: at the first append after Open,
// and whenever the warmer lags, it does not fault in the older segments on
// its way there.
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
	l.warmFrom.Store(6*seg - warm) // asked at 6*seg-warm: a segment not rolled to yet
	l.warmTo.Store(6 * seg)
	if l.warmAhead(&done) || done != to {
		t.Fatalf("warmed up to %d for a target past the last segment, want nothing done (%d)", done, to)
	}
}

// The allocator hands a new segment over before it warms the segment's
// head: an appender that reaches the roll while that warming runs rolls at
// once (taking the faults itself) instead of waiting for all of it.
func TestRollDoesNotWaitForHeadWarming(t *testing.T) {
	const seg, warm = 64 << 10, 32 << 10
	var lp atomic.Pointer[Log]
	opened, blocked, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	handedOver := false
	populate := func(b []byte) {
		<-opened
		l := lp.Load()
		if published(l, b) {
			return // the current segment's warming
		}
		once.Do(func() {
			handedOver = len(l.allocReady) == 1
			close(blocked)
			if handedOver {
				<-release
			}
		})
	}
	l, err := Open(Options{Dir: "/cl", FS: vfs.NewMem(), SegmentSize: seg, WarmBytes: warm, RecoverFrom: -1, populate: populate})
	if err != nil {
		t.Fatal(err)
	}
	lp.Store(l)
	close(opened)
	defer l.Close()
	defer close(release)
	a := bytesAppender(payload(1, 1000))
	if _, err := l.Append(a); err != nil { // warming starts with the first append
		t.Fatal(err)
	}
	<-blocked
	if !handedOver {
		t.Fatal("the allocator warmed the next segment's head before handing it over")
	}
	for l.WrotePosition() < seg+seg/2 {
		if _, err := l.Append(a); err != nil {
			t.Fatal(err)
		}
	}
}

// published reports whether b lies in a segment of l's snapshot.
func published(l *Log, b []byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, s := range l.snap.Load().segs {
		if q := uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))); p >= q && p < q+uintptr(len(s.buf)) {
			return true
		}
	}
	return false
}

// A log opened with records in it pre-faults nothing while it is only read
// (neither ahead of the write position nor the next segment's head); the
// first append starts both.
func TestWarmWaitsForTheFirstAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seg, warm = 64 << 10, 16 << 10
		fs := vfs.NewMem()
		var mu sync.Mutex
		var lp atomic.Pointer[Log]
		var ahead, heads int
		populate := func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if l := lp.Load(); l != nil && published(l, b) {
				ahead++
			} else {
				heads++
			}
		}
		opts := Options{Dir: "/cl", FS: fs, SegmentSize: seg, WarmBytes: warm, RecoverFrom: -1, NoWarm: true}
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		off, err := l.Append(bytesAppender(payload(1, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		opts.NoWarm, opts.populate = false, populate
		if l, err = Open(opts); err != nil {
			t.Fatal(err)
		}
		lp.Store(l)
		defer l.Close()
		if err := l.Read(off, func(Record) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the allocator has prepared the next segment and is idle
		mu.Lock()
		if ahead+heads != 0 || len(l.allocReady) != 1 {
			t.Fatalf("before any append: %d populates ahead, %d of heads, %d segments prepared; want 0, 0, 1", ahead, heads, len(l.allocReady))
		}
		mu.Unlock()
		if _, err := l.Append(bytesAppender(payload(2, 1000))); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if ahead == 0 || heads == 0 {
			t.Fatalf("after the first append: %d populates ahead, %d of the next head; want both", ahead, heads)
		}
	})
}

// The lead follows the writer's rate: a writer that covers less than a
// quarter of the lead in warmHorizon shrinks it to minWarm (pre-faulted
// pages are dirty, and a slow writer would reach them only after the
// kernel wrote them back as zeros), and one that covers more than the
// lead grows it, doubling, to WarmBytes. Virtual time: the sleeps set the
// rate, and without them the writer is infinitely fast.
func TestWarmLeadFollowsTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seg, warm = 32 << 20, 8 << 20
		l, err := Open(Options{Dir: "/cl", FS: vfs.NewMem(), SegmentSize: seg, WarmBytes: warm, RecoverFrom: -1, populate: func([]byte) {}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		a := bytesAppender(payload(1, 4000))
		write := func(to int64, pause time.Duration) {
			for l.WrotePosition() < to {
				if _, err := l.Append(a); err != nil {
					t.Fatal(err)
				}
				time.Sleep(pause)
			}
		}
		lead := func() int64 { return l.warmTo.Load() - l.warmFrom.Load() }
		write(4<<20, 10*time.Millisecond) // ~400 KB/s
		if got := lead(); got != minWarm {
			t.Fatalf("lead of a writer at 400 KB/s: %d, want minWarm %d", got, minWarm)
		}
		write(14<<20, 0)
		if got := lead(); got != warm {
			t.Fatalf("lead of a fast writer: %d, want WarmBytes %d", got, warm)
		}
		write(24<<20, 10*time.Millisecond)
		if got := lead(); got != minWarm {
			t.Fatalf("lead once the writer slowed down: %d, want minWarm %d", got, minWarm)
		}
	})
}
