package commitlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

func TestDeleteBeforeMiddle(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			inner, dir := fc.fs(t)
			fs := newMapCountFS(inner)
			const seg = 64 << 10
			l := openCountedLog(t, fs, dir, seg)
			offs := fillSegments(t, l, 8)
			before := l.Segments()
			require.Len(t, before, 8)
			for i, si := range before {
				require.Equal(t, int64(i*seg), si.Start)
				require.Equal(t, int64(seg), si.Size)
				require.Equal(t, filepath.Join(dir, segmentName(si.Start)), si.Path)
				require.Equal(t, i < 7, si.Sealed)
			}

			// Mid-segment 4: segments 0-3 end at or below it.
			cut := before[4].Start + seg/2
			rep, err := l.DeleteBefore(cut)
			require.NoError(t, err)
			require.Equal(t, DeleteReport{Segments: 4, Bytes: 4 * seg, NewMin: before[4].Start}, rep)
			require.Equal(t, before[4].Start, l.MinOffset())
			require.Equal(t, before[4:], l.Segments())
			for _, si := range before[:4] {
				require.False(t, vfs.Exists(fs, si.Path), si.Path)
				require.Zero(t, fs.mapped(si.Path), "no reader: unmapped at once")
			}
			for _, si := range before[4:] {
				require.True(t, vfs.Exists(fs, si.Path), si.Path)
			}

			// Appending goes on; then check reads, scans, and a reopen.
			for i, n := len(offs), len(offs)+50; i < n; i++ {
				off, err := l.Append(indexed(i))
				require.NoError(t, err)
				offs = append(offs, off)
			}
			check := func(l *Log) {
				t.Helper()
				first := -1
				for i, off := range offs {
					var got int
					err := l.Read(off, func(r Record) (err error) { got, err = checkIndexed(r); return })
					if off < l.MinOffset() {
						requireRemoved(t, err)
						continue
					}
					require.NoError(t, err, "offset %d", off)
					require.Equal(t, i, got)
					if first < 0 {
						first = i
					}
				}
				require.Positive(t, first)
				_, err := l.Scan(0, l.WrotePosition(), true, func(Record) error { return nil })
				requireRemoved(t, err)
				n := first
				next, err := l.Scan(l.MinOffset(), l.WrotePosition(), true, func(r Record) error {
					i, err := checkIndexed(r)
					if err == nil && (i != n || r.Offset != offs[i]) {
						err = fmt.Errorf("record %d at %d, want %d at %d", i, r.Offset, n, offs[n])
					}
					n++
					return err
				})
				require.NoError(t, err)
				require.Equal(t, len(offs), n)
				require.Equal(t, l.WrotePosition(), next)
			}
			check(l)
			require.NoError(t, l.Close())
			require.Zero(t, fs.total(), "Close unmaps everything")

			l = openCountedLog(t, fs, dir, seg)
			require.Equal(t, before[4].Start, l.MinOffset())
			check(l)
			require.NoError(t, l.Close())
			require.Zero(t, fs.total())
		})
	}
}

// TestDeleteBeforeConcurrentReaders reads and scans the whole log in a loop
// while one goroutine appends and another deletes all but the newest
// segments. On real files a segment unmapped under a reader faults (ErrIO)
// or reads another mapping's bytes (a payload mismatch).
func TestDeleteBeforeConcurrentReaders(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			inner, dir := fc.fs(t)
			fs := newMapCountFS(inner)
			const seg = MinSegmentSize * 2
			l := openCountedLog(t, fs, dir, seg)
			const records = 4000
			var offs [records]atomic.Int64 // published by the appender
			var count atomic.Int64
			var deleted, removedReads, goodReads atomic.Int64
			tick := make(chan struct{}, 1)
			done := make(chan struct{})
			// progress carries good reads to the appender, which waits for
			// one every 100 records, so the readers cannot be left out
			// of the run by the scheduler; failed ends that wait.
			progress, failed := make(chan struct{}, 1), make(chan struct{})
			var failOnce sync.Once
			var wg sync.WaitGroup

			wg.Go(func() { // appender
				defer close(done)
				defer close(tick)
				for i := range records {
					off, err := l.Append(indexed(i))
					if err != nil {
						t.Error(err)
						return
					}
					offs[i].Store(off)
					count.Store(int64(i + 1))
					if i%100 == 99 {
						select {
						case <-progress:
						case <-failed:
						}
					}
					if i%20 == 0 {
						select {
						case tick <- struct{}{}:
						default:
						}
					}
				}
			})
			wg.Go(func() { // deleter: keeps the newest two segments
				last := l.MinOffset()
				for range tick {
					rep, err := l.DeleteBefore(max(0, l.WrotePosition()-2*seg))
					if err != nil {
						t.Error(err)
						return
					}
					if rep.NewMin < last || l.MinOffset() < last {
						t.Errorf("MinOffset went back from %d to %d", last, rep.NewMin)
					}
					last = rep.NewMin
					deleted.Add(int64(rep.Segments))
				}
			})
			reader := func(seed uint64, scan bool) {
				r := rand.New(rand.NewPCG(seed, 7))
				verify := func(rec Record) error {
					i, err := checkIndexed(rec)
					// A scan may meet a record before its offset is published (0).
					if o := offs[i].Load(); err == nil && o != rec.Offset && (o != 0 || i == 0) {
						err = fmt.Errorf("record %d at %d, appended at %d", i, rec.Offset, offs[i].Load())
					}
					return err
				}
				for {
					select {
					case <-done:
						return
					default:
					}
					n := count.Load()
					if n == 0 {
						continue
					}
					i := r.Int64N(n) // mostly removed by now
					if r.IntN(2) == 0 {
						i = n - 1 - r.Int64N(min(n, 100)) // recent, mostly kept
					}
					off := offs[i].Load()
					var err error
					if scan {
						_, err = l.Scan(off, off+seg, true, verify)
					} else {
						err = l.Read(off, verify)
					}
					switch {
					case err == nil:
						goodReads.Add(1)
						select {
						case progress <- struct{}{}:
						default:
						}
					case errors.Is(err, ErrNotFound) && off < l.MinOffset():
						if !strings.Contains(err.Error(), "was removed") {
							t.Errorf("read below MinOffset: %v", err)
						}
						removedReads.Add(1)
					default:
						t.Errorf("read of record %d at %d (min %d): %v", i, off, l.MinOffset(), err)
						failOnce.Do(func() { close(failed) })
						return
					}
				}
			}
			for g := range 4 {
				wg.Go(func() { reader(uint64(g), g%2 == 1) })
			}
			wg.Wait()
			if fc.name == "strict" {
				// Unmap first: DeleteBefore stopped at each segment a
				// reader held until the reader left; with none left, it
				// catches up.
				rep, err := l.DeleteBefore(max(0, l.WrotePosition()-2*seg))
				require.NoError(t, err)
				deleted.Add(int64(rep.Segments))
			}
			require.Nil(t, l.Fenced())
			t.Logf("deleted %d segments; reads: %d good, %d removed", deleted.Load(), goodReads.Load(), removedReads.Load())
			require.Greater(t, deleted.Load(), int64(20))
			require.GreaterOrEqual(t, goodReads.Load(), int64(records/100))
			require.NoError(t, l.Close())
			require.Zero(t, fs.total(), "every mapping released")
		})
	}
}

// TestReaderPinsRemovedSegment blocks a reader inside its callback across a
// DeleteBefore (and then a Close): the segment's file goes, its mapping
// stays until the callback returns.
func TestReaderPinsRemovedSegment(t *testing.T) {
	for _, fc := range fsCases {
		for _, closeToo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/close=%v", fc.name, closeToo), func(t *testing.T) {
				if fc.name == "strict" {
					t.Skip("the Linux order (remove, then unmap); TestUnmapFirstDeleteWaitsForReader covers the unmap-first one")
				}
				inner, dir := fc.fs(t)
				fs := newMapCountFS(inner)
				l := openCountedLog(t, fs, dir, MinSegmentSize)
				offs := fillSegments(t, l, 4)
				segs := l.Segments()
				inside, proceed, readDone := make(chan struct{}), make(chan struct{}), make(chan error)
				var view []byte
				go func() {
					readDone <- l.Read(offs[0], func(r Record) error {
						view = r.Payload
						close(inside)
						<-proceed
						_, err := checkIndexed(r) // still mapped, file removed
						return err
					})
				}()
				<-inside
				rep, err := l.DeleteBefore(segs[2].Start)
				require.NoError(t, err)
				require.Equal(t, 2, rep.Segments)
				require.False(t, vfs.Exists(fs, segs[0].Path))
				require.Equal(t, 1, fs.mapped(segs[0].Path), "pinned by the reader")
				require.Equal(t, 1, fs.mapped(segs[1].Path), "in the reader's snapshot")
				requireRemoved(t, l.Read(offs[0], func(Record) error { return nil }))
				_, err = checkIndexed(Record{Offset: offs[0], Payload: view})
				require.NoError(t, err, "readable after the removal")

				closeDone := make(chan error, 1)
				if closeToo {
					go func() { closeDone <- l.Close() }()
					for !l.snap.Load().closed { // Close got past delMu
						requireNoValue(t, closeDone)
						runtime.Gosched()
					}
					require.Equal(t, 1, fs.mapped(segs[0].Path), "Close waits for the reader")
					requireNoValue(t, closeDone)
				}
				close(proceed)
				require.NoError(t, <-readDone)
				if closeToo {
					// Close, waiting for the reader, may be the one that
					// unmaps: wait for it too.
					require.NoError(t, <-closeDone)
				}
				require.Zero(t, fs.mapped(segs[0].Path), "released when the reader returned")
				require.Zero(t, fs.mapped(segs[1].Path))
				if closeToo {
					require.ErrorIs(t, l.Read(offs[len(offs)-1], func(Record) error { return nil }), ErrClosed)
				} else {
					require.Equal(t, 1, fs.mapped(segs[2].Path))
					require.NoError(t, l.Close())
				}
				require.Zero(t, fs.total())
			})
		}
	}
}

// TestDeleteBeforeInterrupted fails the removal of the second segment, then
// the directory sync, and reopens crash images: the log is always a
// contiguous run that reads back.
func TestDeleteBeforeInterrupted(t *testing.T) {
	reopen := func(t *testing.T, ffs *vfs.Faulty, offs []int64, wantMin int64) {
		t.Helper()
		for _, p := range []float64{0, 0.5, 1} {
			img := ffs.Crash(rand.New(rand.NewPCG(3, uint64(p*10))), p)
			l2, err := Open(Options{Dir: "/cl", FS: img, SegmentSize: MinSegmentSize, RecoverFrom: -1})
			require.NoError(t, err, "p=%v", p)
			if wantMin >= 0 {
				require.Equal(t, wantMin, l2.MinOffset())
			}
			for i, off := range offs {
				err := l2.Read(off, func(r Record) error {
					got, err := checkIndexed(r)
					if err == nil && got != i {
						err = fmt.Errorf("record %d, want %d", got, i)
					}
					return err
				})
				if off < l2.MinOffset() {
					requireRemoved(t, err)
				} else if off < l2.WrotePosition() {
					require.NoError(t, err)
				}
			}
			require.NoError(t, l2.Close())
		}
	}

	t.Run("remove", func(t *testing.T) {
		ffs := vfs.NewFaulty(vfs.NewMem())
		l := openLog(t, ffs, "/cl", MinSegmentSize)
		defer l.Close()
		offs := fillSegments(t, l, 6)
		_, err := l.Flush()
		require.NoError(t, err)
		segs := l.Segments()
		ffs.SetInjector(func(op vfs.Op, path string) error {
			// Renaming it to a spare fails too, so DeleteBefore falls
			// back to removing it.
			if (op == vfs.OpRemove || op == vfs.OpRename) && path == segs[1].Path {
				return os.ErrPermission
			}
			return nil
		})
		rep, err := l.DeleteBefore(segs[4].Start)
		require.ErrorIs(t, err, ErrIO)
		require.ErrorContains(t, err, segs[1].Path)
		require.Equal(t, DeleteReport{Segments: 1, Bytes: MinSegmentSize, NewMin: segs[1].Start}, rep)
		require.Equal(t, segs[1].Start, l.MinOffset())
		require.Nil(t, l.Fenced(), "a failed remove changes nothing on disk")
		reopen(t, ffs, offs, segs[1].Start)

		ffs.SetInjector(nil)
		rep, err = l.DeleteBefore(segs[4].Start)
		require.NoError(t, err)
		require.Equal(t, 3, rep.Segments)
		_, err = l.Append(indexed(len(offs)))
		require.NoError(t, err)
		reopen(t, ffs, offs, segs[4].Start)
	})

	t.Run("syncdir", func(t *testing.T) {
		ffs := vfs.NewFaulty(vfs.NewMem())
		l := openLog(t, ffs, "/cl", MinSegmentSize)
		defer l.Close()
		offs := fillSegments(t, l, 6)
		_, err := l.Flush()
		require.NoError(t, err)
		segs := l.Segments()
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpSyncDir {
				return os.ErrInvalid
			}
			return nil
		})
		rep, err := l.DeleteBefore(segs[4].Start)
		require.ErrorIs(t, err, ErrFenced)
		require.Equal(t, 1, rep.Segments, "stops at the first failed sync")
		require.Equal(t, segs[1].Start, l.MinOffset())
		_, err = l.Append(indexed(len(offs)))
		require.ErrorIs(t, err, ErrFenced)
		_, err = l.DeleteBefore(segs[4].Start)
		require.ErrorIs(t, err, ErrFenced)
		reopen(t, ffs, offs, -1) // the removal may or may not have survived
	})
}

func TestDeleteBeforeKeepsWriteSegment(t *testing.T) {
	fs := newMapCountFS(vfs.NewMem())
	l := openCountedLog(t, fs, "/cl", MinSegmentSize)

	rep, err := l.DeleteBefore(1 << 62)
	require.NoError(t, err, "one segment: nothing to do")
	require.Equal(t, DeleteReport{}, rep)

	offs := fillSegments(t, l, 5)
	segs := l.Segments()
	for _, bad := range []int64{-1, -1 << 62} {
		rep, err := l.DeleteBefore(bad)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Equal(t, DeleteReport{NewMin: 0}, rep)
		require.Equal(t, segs, l.Segments(), "nothing changed")
	}
	rep, err = l.DeleteBefore(segs[1].Start - 1)
	require.NoError(t, err)
	require.Equal(t, DeleteReport{NewMin: 0}, rep, "segment 0 ends past the offset")

	rep, err = l.DeleteBefore(1 << 62)
	require.NoError(t, err)
	require.Equal(t, DeleteReport{Segments: 4, Bytes: 4 * MinSegmentSize, NewMin: segs[4].Start}, rep)
	require.Equal(t, segs[4:], l.Segments())
	require.False(t, l.Segments()[0].Sealed)
	rep, err = l.DeleteBefore(1 << 62)
	require.NoError(t, err)
	require.Equal(t, DeleteReport{NewMin: segs[4].Start}, rep, "the write segment stays")

	last := offs[len(offs)-1]
	require.NoError(t, l.Read(last, func(r Record) error { _, err := checkIndexed(r); return err }))
	for i := len(offs); len(l.Segments()) < 3; i++ {
		_, err := l.Append(indexed(i))
		require.NoError(t, err)
	}
	require.NoError(t, l.Read(last, func(r Record) error { _, err := checkIndexed(r); return err }))

	require.NoError(t, l.Close())
	_, err = l.DeleteBefore(1 << 62)
	require.ErrorIs(t, err, ErrClosed)
	require.Zero(t, fs.total())
}

// TestOpenWithoutOldSegments opens directories whose oldest segments are
// gone (removed by retention, or by hand before the recovery window) with
// every recovery setting.
func TestOpenWithoutOldSegments(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs, "/cl", MinSegmentSize)
	offs := fillSegments(t, l, 8)
	segs := l.Segments()
	end := l.WrotePosition()
	require.NoError(t, l.Close())
	for _, s := range segs[:3] {
		require.NoError(t, fs.Remove(s.Path))
	}
	for _, o := range []Options{
		{RecoverFrom: -1},
		{RecoverFrom: -1, CleanShutdown: true},
		{RecoverFrom: -1, Trusted: segs[1].Start},
		{RecoverFrom: 0},
		{RecoverFrom: segs[6].Start},
	} {
		o.Dir, o.FS, o.SegmentSize = "/cl", fs, MinSegmentSize
		l, err := Open(o)
		require.NoError(t, err, "%+v", o)
		require.Equal(t, segs[3].Start, l.MinOffset())
		require.Equal(t, end, l.WrotePosition())
		require.Zero(t, l.Report().RemovedSegments)
		for i, off := range offs {
			err := l.Read(off, func(r Record) error {
				got, err := checkIndexed(r)
				if err == nil && got != i {
					err = fmt.Errorf("record %d, want %d", got, i)
				}
				return err
			})
			if off < segs[3].Start {
				requireRemoved(t, err)
			} else {
				require.NoError(t, err)
			}
		}
		require.NoError(t, l.Close())
	}
}
