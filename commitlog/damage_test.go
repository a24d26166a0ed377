package commitlog

// Recovery tests on damaged segment files (reliability plan S8, S10, S11,
// S13, S14): every test builds a log, closes it, edits the closed segment
// files directly (in a MemFS, or on disk where noted) and opens it again.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TestTornTailEveryCut cuts the last segment at every byte inside its last
// three records, both by shortening the file and by zeroing from the cut to
// the end of the preallocated segment (S10).
func TestTornTailEveryCut(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	base := buildLog(t, rng, MinSegmentSize, 3, 4, 20, 260)
	last := base.end / base.seg * base.seg
	if base.end%base.seg == 0 {
		last -= base.seg
	}
	from := base.recs[len(base.recs)-3].off
	require.GreaterOrEqual(t, from, last, "the last three records are in the last segment")
	orig := readFile(t, base.fs, base.segPath(last))
	trials := 0
	for c := from; c < base.end; c++ {
		for _, shape := range []string{"truncate", "zero"} {
			trials++
			tl := base.clone(t)
			pos := c - last
			switch shape {
			case "truncate":
				truncateFile(t, tl.fs, tl.segPath(last), pos)
			case "zero":
				editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte { clear(b[pos:]); return b })
			}
			wantEnd := last
			for _, r := range base.recs {
				if r.end() <= c {
					wantEnd = max(wantEnd, r.end())
				}
			}
			l, err := tl.open(t, Options{RecoverFrom: -1})
			require.NoError(t, err, "seed %d cut %d %s", seed, c, shape)
			rep := l.Report()
			require.Equal(t, wantEnd, rep.End, "seed %d cut %d %s", seed, c, shape)
			require.Equal(t, wantEnd, l.WrotePosition())
			torn := hasNonZero(orig[wantEnd-last : pos])
			require.Equal(t, torn, rep.TruncatedBytes > 0, "seed %d cut %d %s: truncated %d", seed, c, shape, rep.TruncatedBytes)
			require.LessOrEqual(t, rep.TruncatedBytes, tl.seg-(wantEnd-last))
			require.Zero(t, rep.DroppedRecords)
			require.Zero(t, rep.RemovedSegments)
			kept := base.recsBefore(wantEnd)
			checkRecords(t, l, kept)
			appendAfterRecovery(t, tl, l, kept, rng)
		}
	}
	t.Logf("%d cut points x 2 shapes = %d trials, 0 failures", base.end-from, trials)
}

// TestTornTailShapes covers the other torn-tail shapes of S10: zero-fill
// from a random point, a zeroed 512-byte sector, garbage after the tail,
// and fully preallocated zeros (with and without a spare segment).
func TestTornTailShapes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	base := buildLog(t, rng, MinSegmentSize, 3, 8, 20, 300)
	last := (base.end - 1) / base.seg * base.seg
	orig := readFile(t, base.fs, base.segPath(last))

	t.Run("zero-fill-random", func(t *testing.T) {
		for range 40 {
			tl := base.clone(t)
			c := last + rng.Int64N(base.end-last)
			editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte { clear(b[c-last:]); return b })
			wantEnd := last
			for _, r := range base.recs {
				if r.end() <= c {
					wantEnd = max(wantEnd, r.end())
				}
			}
			l, err := tl.open(t, Options{RecoverFrom: -1})
			require.NoError(t, err, "seed %d cut %d", seed, c)
			require.Equal(t, wantEnd, l.Report().End, "seed %d cut %d", seed, c)
			kept := base.recsBefore(wantEnd)
			checkRecords(t, l, kept)
			appendAfterRecovery(t, tl, l, kept, rng)
		}
	})

	t.Run("zero-sector", func(t *testing.T) {
		sectors := 0
		for sec := int64(0); sec < base.end-last; sec += 512 {
			tl := base.clone(t)
			editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte { clear(b[sec : sec+512]); return b })
			lo, hi := last+sec, last+sec+512
			// The first record that lost a non-zero byte is where the log ends;
			// every intact record after it is a valid record past a torn tail
			// (never synced: no flush happened), dropped and counted.
			wantEnd, dropped := int64(-1), 0
			for _, r := range base.recs {
				a, b := max(r.off, lo), min(r.end(), hi)
				damaged := a < b && hasNonZero(orig[a-last:b-last])
				switch {
				case wantEnd < 0 && damaged:
					wantEnd = r.off
				case wantEnd >= 0 && !damaged:
					dropped++
				}
			}
			if wantEnd < 0 {
				wantEnd = base.end
			}
			sectors++
			l, err := tl.open(t, Options{RecoverFrom: -1})
			require.NoError(t, err, "seed %d sector %d", seed, sec)
			rep := l.Report()
			require.Equal(t, wantEnd, rep.End, "seed %d sector %d", seed, sec)
			require.Equal(t, dropped, rep.DroppedRecords, "seed %d sector %d", seed, sec)
			// Bytes are zeroed (and counted) only if some non-zero byte is
			// left after the end: a sector holding the whole last record
			// leaves none.
			edited := slices.Clone(orig)
			clear(edited[sec : sec+512])
			require.Equal(t, hasNonZero(edited[wantEnd-last:base.end-last]), rep.TruncatedBytes > 0, "seed %d sector %d", seed, sec)
			kept := base.recsBefore(wantEnd)
			checkRecords(t, l, kept)
			appendAfterRecovery(t, tl, l, kept, rng)
		}
		require.Positive(t, sectors, "the last segment holds at least one sector of records")
	})

	t.Run("garbage-after-tail", func(t *testing.T) {
		room := base.seg - (base.end - last)
		if room == 0 {
			t.Skip("the last segment is full")
		}
		for _, n := range []int64{1, 2, 7, 12, 27, 28, 100, room / 2, room} {
			n = min(n, room)
			tl := base.clone(t)
			g := randPayload(rng, int(n))
			editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte { copy(b[base.end-last:], g); return b })
			l, err := tl.open(t, Options{RecoverFrom: -1})
			require.NoError(t, err, "seed %d garbage %d", seed, n)
			rep := l.Report()
			require.Equal(t, base.end, rep.End)
			require.Positive(t, rep.TruncatedBytes)
			require.Zero(t, rep.DroppedRecords)
			checkRecords(t, l, base.recs)
			appendAfterRecovery(t, tl, l, base.recs, rng)
		}
	})

	t.Run("garbage-that-looks-like-a-frame", func(t *testing.T) {
		// A header with the right magic and a plausible size but a bad
		// checksum, right after the last record.
		tl := base.clone(t)
		editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte {
			h := b[base.end-last:]
			le.PutUint32(h[0:], 64)
			le.PutUint32(h[4:], MagicV1)
			le.PutUint32(h[8:], 12345)
			le.PutUint64(h[12:], uint64(base.end))
			return b
		})
		l, err := tl.open(t, Options{RecoverFrom: -1})
		require.NoError(t, err)
		require.Equal(t, base.end, l.Report().End)
		require.Positive(t, l.Report().TruncatedBytes)
		checkRecords(t, l, base.recs)
		require.NoError(t, l.Close())
	})

	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprintf("preallocated-zero-tail/clean=%v", clean), func(t *testing.T) {
			tl := base.clone(t)
			// A spare preallocated segment, as a kill -9 leaves the one the
			// allocator prepared.
			spare := last + tl.seg
			writeFile(t, tl.fs, tl.segPath(spare), make([]byte, tl.seg))
			l, err := tl.open(t, Options{RecoverFrom: -1, CleanShutdown: clean, Trusted: base.end})
			require.NoError(t, err)
			rep := l.Report()
			require.Equal(t, base.end, rep.End)
			require.Zero(t, rep.TruncatedBytes)
			require.Zero(t, rep.DroppedRecords)
			require.Equal(t, 1, rep.RemovedSegments)
			checkRecords(t, l, base.recs)
			appendAfterRecovery(t, tl, l, base.recs, rng)
		})
	}
}

// corruptErr asserts that err is a *CorruptError (matching ErrCorrupt)
// naming path and, if off >= 0, the offset.
func corruptErr(t testing.TB, err error, path string, off int64, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt, msgAndArgs...)
	var ce *errs.CorruptError
	require.True(t, errors.As(err, &ce), msgAndArgs...)
	require.Equal(t, path, ce.Path, msgAndArgs...)
	if off >= 0 {
		require.Equal(t, off, ce.Offset, msgAndArgs...)
	}
	require.Contains(t, err.Error(), path, msgAndArgs...)
}

// TestBitFlipInSealedSegment flips one random bit in a random record (or
// end-of-segment marker) of a sealed segment of a cleanly closed log, many
// times (S11). Open must fail with an ErrCorrupt naming the segment and the
// record's offset, and change nothing.
func TestBitFlipInSealedSegment(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	// Flush after every append, so that each record's SYNCED field also
	// proves the ones before it were durable.
	b := newLogBuilder(t, rng, MinSegmentSize)
	for b.l.WrotePosition() < 5*b.tl.seg+100 {
		b.add(1 + rng.IntN(400))
		b.flush()
	}
	base := b.close()
	// Target segments [0, sealed]: each is followed by a whole segment of
	// records, so a record written after the damaged one was flushed.
	sealed := base.end/base.seg - 2
	type target struct {
		seg, pos int64 // segment start, position of the record or marker in it
		size     int64
	}
	var targets []target
	for _, r := range base.recs {
		if s := r.off / base.seg * base.seg; s/base.seg <= sealed {
			targets = append(targets, target{s, r.off - s, int64(r.size)})
		}
	}
	for s := int64(0); s <= sealed*base.seg; s += base.seg {
		var endPos int64
		for _, r := range base.recs {
			if r.off >= s && r.off < s+base.seg {
				endPos = r.end() - s
			}
		}
		if base.seg-endPos >= BlankSize {
			targets = append(targets, target{s, endPos, BlankSize})
		}
	}
	const trials = 1000
	counts := map[string]int{}
	for i := range trials {
		tg := targets[rng.IntN(len(targets))]
		for _, trusted := range []int64{base.end, 0} {
			tl := base.clone(t)
			path := tl.segPath(tg.seg)
			bit := rng.Int64N(tg.size * 8)
			field := "payload"
			switch p := bit / 8; {
			case tg.size == BlankSize:
				field = "blank marker"
			case p < 4:
				field = "size"
			case p < 8:
				field = "magic"
			case p < 12:
				field = "crc"
			case p < 20:
				field = "physoffset"
			case p < 28:
				field = "synced"
			}
			counts[field]++
			editFile(t, tl.fs, path, func(b []byte) []byte { b[tg.pos+bit/8] ^= 1 << (bit % 8); return b })
			before := dirImage(t, tl.fs, tl.dir)
			// Full validation, as after a crash the store validates from
			// the checkpoint; the default window is tested below.
			l, err := tl.open(t, Options{RecoverFrom: 0, Trusted: trusted, CleanShutdown: trusted > 0})
			if err == nil {
				l.Close()
			}
			msg := fmt.Sprintf("seed %d trial %d: bit %d of the %s at %s+%d, trusted %d", seed, i, bit, field, path, tg.pos, trusted)
			require.Error(t, err, msg)
			corruptErr(t, err, path, tg.pos, msg)
			require.Equal(t, before, dirImage(t, tl.fs, tl.dir), "nothing changed: %s", msg)
		}
	}
	t.Logf("%d flips x 2 (trusted, sync-proven): detected all, silent truncations 0; fields %v", trials, counts)
}

// TestBitFlipOutsideRecoveryWindow documents the default recovery window
// (the last three segments, as RocketMQ): a flip in an older segment is not
// found by Open, but a read of that record returns ErrCorrupt and never
// the damaged bytes.
func TestBitFlipOutsideRecoveryWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	base := buildLog(t, rng, MinSegmentSize, 6, 1, 50, 400)
	tl := base.clone(t)
	r := base.recs[1]
	editFile(t, tl.fs, tl.segPath(0), func(b []byte) []byte { b[r.off+FrameSize+3] ^= 0x10; return b })
	l, err := tl.open(t, Options{RecoverFrom: -1, Trusted: base.end})
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, base.end, l.WrotePosition())
	err = l.Read(r.off, func(Record) error { return errors.New("damaged record delivered") })
	corruptErr(t, err, tl.segPath(0), r.off)
	_, err = l.Scan(0, l.WrotePosition(), true, func(Record) error { return nil })
	corruptErr(t, err, tl.segPath(0), r.off)
	require.NoError(t, l.Read(base.recs[0].off, func(Record) error { return nil }), "its neighbours still read")
}

// TestDamageNearEnd zeroes 4 bytes about 100 bytes before the end with
// later records present (S13): damage is proven (ErrCorrupt) when the
// later records say it was synced or the checkpoint does, and a torn tail
// otherwise.
func TestDamageNearEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	b := newLogBuilder(t, rng, 64<<10)
	b.addRandom(20, 100, 300)
	b.flush()
	flushed := b.l.WrotePosition()
	for range 6 {
		b.add(30) // 58-byte records: ~100 bytes from the end has two after it
	}
	base := b.close()
	path := base.segPath(0)
	zero4 := func(tl *testLog, at int64) {
		editFile(t, tl.fs, path, func(b []byte) []byte { clear(b[at : at+4]); return b })
	}
	recAt := func(at int64) int {
		for i, r := range base.recs {
			if r.off <= at && at < r.end() {
				return i
			}
		}
		t.Fatalf("no record at %d", at)
		return -1
	}
	i := recAt(base.end - 100)
	at := base.recs[i].off + FrameSize + 2 // inside the payload: never zero
	require.Greater(t, base.recs[i].off, flushed, "damage in an unsynced record")
	later := len(base.recs) - 1 - i
	require.GreaterOrEqual(t, later, 1)

	t.Run("unsynced-later-records-torn-tail", func(t *testing.T) {
		tl := base.clone(t)
		zero4(tl, at)
		l, err := tl.open(t, Options{RecoverFrom: -1, Trusted: flushed})
		require.NoError(t, err)
		rep := l.Report()
		require.Equal(t, base.recs[i].off, rep.End)
		require.Equal(t, later, rep.DroppedRecords)
		require.Positive(t, rep.TruncatedBytes)
		checkRecords(t, l, base.recs[:i])
		appendAfterRecovery(t, tl, l, base.recs[:i], rng)
	})
	t.Run("checkpoint-past-damage-corrupt", func(t *testing.T) {
		tl := base.clone(t)
		zero4(tl, at)
		before := dirImage(t, tl.fs, tl.dir)
		_, err := tl.open(t, Options{RecoverFrom: -1, Trusted: base.end})
		corruptErr(t, err, path, base.recs[i].off)
		require.Equal(t, before, dirImage(t, tl.fs, tl.dir))
	})
	t.Run("synced-field-proves-damage", func(t *testing.T) {
		// Damage before the flush point: the records written after the
		// flush carry SYNCED = flushed, past the damage.
		j := recAt(flushed - 100)
		tl := base.clone(t)
		zero4(tl, base.recs[j].off+FrameSize+1)
		_, err := tl.open(t, Options{RecoverFrom: -1, Trusted: 0})
		corruptErr(t, err, path, base.recs[j].off)
		require.Contains(t, err.Error(), "written after a flush")
	})
}

// TestUnexpectedFiles covers S14: short, missing, extra and misnamed files.
func TestUnexpectedFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	base := buildLog(t, rng, MinSegmentSize, 3, 2, 50, 400)
	starts := base.segStarts()
	require.Len(t, starts, 3)
	s0, s1, s2 := starts[0], starts[1], starts[2]
	failCases := []struct {
		name   string
		mutate func(tl *testLog)
		path   string // the file the error must name
		segOpt int64  // SegmentSize to reopen with, 0 = the same
	}{
		{"short-sealed-segment", func(tl *testLog) { truncateFile(t, tl.fs, tl.segPath(s0), 2000) }, base.segPath(s0), 0},
		{"gap", func(tl *testLog) { require.NoError(t, tl.fs.Remove(tl.segPath(s1))) }, base.segPath(s2), 0},
		{"directory-named-like-a-segment", func(tl *testLog) { require.NoError(t, tl.fs.MkdirAll(tl.segPath(s2+tl.seg), 0o755)) },
			base.segPath(s2 + base.seg), 0},
		{"misaligned-name", func(tl *testLog) {
			writeFile(t, tl.fs, filepath.Join(tl.dir, "00000000000000000100"), make([]byte, tl.seg))
		},
			filepath.Join(base.dir, "00000000000000000100"), 0},
		{"overlapping-segment", func(tl *testLog) {
			writeFile(t, tl.fs, filepath.Join(tl.dir, segmentName(s1+tl.seg/2)), readFile(t, tl.fs, tl.segPath(s1)))
		}, filepath.Join(base.dir, segmentName(s1+base.seg/2)), 0},
		{"oversized-last-segment", func(tl *testLog) {
			editFile(t, tl.fs, tl.segPath(s2), func(b []byte) []byte { return append(b, randPayload(rng, 100)...) })
		}, base.segPath(s2), 0},
		{"opened-with-another-segment-size", func(tl *testLog) {}, base.segPath(s0), 2 * base.seg},
	}
	for _, c := range failCases {
		t.Run(c.name, func(t *testing.T) {
			tl := base.clone(t)
			c.mutate(tl)
			before := dirImage(t, tl.fs, tl.dir)
			if c.segOpt != 0 {
				tl.seg = c.segOpt
			}
			l, err := tl.open(t, Options{RecoverFrom: -1})
			if err == nil {
				l.Close()
			}
			corruptErr(t, err, c.path, -1)
			require.Equal(t, before, dirImage(t, tl.fs, tl.dir), "a failed Open changes nothing")
		})
	}

	t.Run("zero-length-last-segment", func(t *testing.T) {
		tl := base.clone(t)
		truncateFile(t, tl.fs, tl.segPath(s2), 0)
		l, err := tl.open(t, Options{RecoverFrom: -1})
		require.NoError(t, err)
		require.Equal(t, s2, l.Report().End, "the records of the emptied segment are gone; the blank before it is kept")
		kept := base.recsBefore(s2)
		checkRecords(t, l, kept)
		appendAfterRecovery(t, tl, l, kept, rng)
		size, _, err := tl.fs.Stat(tl.segPath(s2))
		require.NoError(t, err)
		require.Equal(t, tl.seg, size, "an interrupted allocation is completed")
	})
	t.Run("temp-files-removed-unknown-files-ignored", func(t *testing.T) {
		tl := base.clone(t)
		tmp := []string{segmentName(s2+tl.seg) + ".tmp", "whatever.tmp"}
		unknown := []string{"README", "0000000000000000000x", "123", segmentName(s0) + ".deleted", "-0000000000000000001"}
		for _, n := range append(append([]string(nil), tmp...), unknown...) {
			writeFile(t, tl.fs, filepath.Join(tl.dir, n), []byte("junk"))
		}
		l, err := tl.open(t, Options{RecoverFrom: -1})
		require.NoError(t, err)
		require.Equal(t, base.end, l.Report().End)
		checkRecords(t, l, base.recs)
		require.NoError(t, l.Close())
		for _, n := range tmp {
			require.False(t, vfs.Exists(tl.fs, filepath.Join(tl.dir, n)), "%s removed", n)
		}
		for _, n := range unknown {
			require.Equal(t, "junk", string(readFile(t, tl.fs, filepath.Join(tl.dir, n))), "%s left alone", n)
		}
	})
}

// TestInterruptedTruncationLeavesNoGap makes the recovery's removal of
// discarded segments fail half-way (as a kill -9 during Open would stop
// it): the next Open must still succeed, so the removal has to leave a
// contiguous run of segments.
func TestInterruptedTruncationLeavesNoGap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	base := buildLog(t, rng, MinSegmentSize, 4, 2, 50, 400)
	starts := base.segStarts()
	require.Len(t, starts, 4)
	// Destroy the end-of-segment marker of segment 1: the log now ends
	// there, and segments 2 and 3 hold only never-synced records.
	var end1 int64
	for _, r := range base.recs {
		if r.off < starts[2] {
			end1 = r.end()
		}
	}
	tl := base.clone(t)
	editFile(t, tl.fs, tl.segPath(starts[1]), func(b []byte) []byte { clear(b[end1-starts[1]:]); return b })
	ffs := vfs.NewFaulty(tl.fs)
	removes := 0
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRemove && filepath.Dir(path) == tl.dir {
			if removes++; removes == 2 {
				return errors.New("injected: killed during recovery")
			}
		}
		return nil
	})
	_, err := Open(Options{Dir: tl.dir, FS: ffs, SegmentSize: tl.seg, RecoverFrom: -1, NoWarm: true})
	require.ErrorIs(t, err, ErrIO)
	require.Equal(t, 2, removes)

	l, err := tl.open(t, Options{RecoverFrom: -1})
	require.NoError(t, err, "the interrupted truncation left a gap")
	require.Equal(t, end1, l.Report().End)
	checkRecords(t, l, base.recsBefore(end1))
	require.NoError(t, l.Close())
}

// TestCleanShutdownTornLastRecord: the previous owner says it closed
// cleanly (and the checkpoint says everything was flushed), but the last
// record is torn. Open still verifies the tail and truncates it (S8a).
func TestCleanShutdownTornLastRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	base := buildLog(t, rng, MinSegmentSize, 2, 3, 50, 300)
	lastRec := base.recs[len(base.recs)-1]
	seg := lastRec.off / base.seg * base.seg
	tears := map[string]func(b []byte) []byte{
		"flipped-byte": func(b []byte) []byte { b[lastRec.end()-seg-1] ^= 0xFF; return b },
		"shortened":    func(b []byte) []byte { return b[:lastRec.end()-seg-5] },
		"zeroed-end":   func(b []byte) []byte { clear(b[lastRec.off-seg+FrameSize:]); return b },
	}
	for name, tear := range tears {
		t.Run(name, func(t *testing.T) {
			tl := base.clone(t)
			editFile(t, tl.fs, tl.segPath(seg), tear)
			l, err := tl.open(t, Options{RecoverFrom: -1, CleanShutdown: true, Trusted: base.end})
			require.NoError(t, err)
			rep := l.Report()
			require.Equal(t, lastRec.off, rep.End)
			require.Positive(t, rep.TruncatedBytes)
			kept := base.recs[:len(base.recs)-1]
			checkRecords(t, l, kept)
			appendAfterRecovery(t, tl, l, kept, rng)
		})
	}
}

// TestDamageOnDisk repeats a torn tail and a bit flip on real files.
func TestDamageOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cl")
	rng := rand.New(rand.NewPCG(9, 9))
	l := openLog(t, vfs.OS, dir, MinSegmentSize)
	var recs []tRec
	for l.WrotePosition() < 3*MinSegmentSize {
		p := randPayload(rng, 1+rng.IntN(500))
		off, err := l.Append(bytesAppender(p))
		require.NoError(t, err)
		recs = append(recs, tRec{off, FrameSize + len(p), p})
		_, err = l.Flush()
		require.NoError(t, err)
	}
	end := l.WrotePosition()
	require.NoError(t, l.Close())
	seg := func(start int64) string { return filepath.Join(dir, segmentName(start)) }
	last := recs[len(recs)-1]
	// Torn last record: the file is cut inside it.
	require.NoError(t, os.Truncate(seg(last.off/MinSegmentSize*MinSegmentSize), last.off%MinSegmentSize+10))
	l, err := Open(Options{Dir: dir, SegmentSize: MinSegmentSize, RecoverFrom: -1, Trusted: end})
	require.NoError(t, err)
	require.Equal(t, last.off, l.Report().End)
	fi, err := os.Stat(seg(last.off / MinSegmentSize * MinSegmentSize))
	require.NoError(t, err)
	require.EqualValues(t, MinSegmentSize, fi.Size(), "the short last segment is extended")
	require.NoError(t, l.Close())
	// A flipped bit in segment 0.
	b, err := os.ReadFile(seg(0))
	require.NoError(t, err)
	b[recs[2].off+FrameSize] ^= 4
	require.NoError(t, os.WriteFile(seg(0), b, 0o644))
	_, err = Open(Options{Dir: dir, SegmentSize: MinSegmentSize, RecoverFrom: 0, Trusted: last.off})
	corruptErr(t, err, seg(0), recs[2].off)
}
