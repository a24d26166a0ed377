package commitlog

// Fuzz targets for recovery and reads (reliability plan S38). Their seed
// corpora run as unit tests in every `go test`; fuzz them with
//
//	go test -run '^$' -fuzz '^FuzzRecoverSegment$' -fuzztime 5m ./commitlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

const fuzzSeg = MinSegmentSize

// messageAppender appends an encoded message payload, as the store does.
type messageAppender struct {
	m    *message.Message
	meta message.Meta
}

func (a *messageAppender) PayloadSize() int { return message.PayloadSize(a.m, len(a.meta.Uniq)) }
func (a *messageAppender) EncodePayload(dst []byte, phys int64) {
	message.Encode(dst, a.m, &a.meta)
}

// fuzzImage builds the bytes of a log's segments (concatenated, the last
// one cut after its data) from real records: message payloads, blank
// markers where a segment filled up, and flushes between some appends so
// that SYNCED fields vary.
func fuzzImage(f *testing.F, n int, seed uint64) []byte {
	fs := vfs.NewMem()
	l, err := Open(Options{Dir: "/cl", FS: fs, SegmentSize: fuzzSeg, NoWarm: true, RecoverFrom: -1})
	if err != nil {
		f.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range n {
		m := &message.Message{Topic: "fuzz", Tags: "t", Body: make([]byte, 1+rng.IntN(700))}
		for j := range m.Body {
			m.Body[j] = byte(rng.Uint32())
		}
		if _, err := l.Append(&messageAppender{m: m, meta: message.Meta{QueueID: int32(i % 3), QueueOffset: int64(i / 3)}}); err != nil {
			f.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			if _, err := l.Flush(); err != nil {
				f.Fatal(err)
			}
		}
	}
	end := l.WrotePosition()
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	var img []byte
	for s := int64(0); s < end; s += fuzzSeg {
		b, err := vfs.ReadFile(fs, filepath.Join("/cl", segmentName(s)))
		if err != nil {
			f.Fatal(err)
		}
		img = append(img, b...)
	}
	return img[:end]
}

// loadImage writes img as segments of fuzzSeg bytes (the last may be short).
func loadImage(t testing.TB, img []byte) *vfs.MemFS {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/cl", 0o755); err != nil {
		t.Fatal(err)
	}
	for s := 0; s < len(img) || s == 0; s += fuzzSeg {
		writeFile(t, fs, filepath.Join("/cl", segmentName(int64(s))), img[s:min(s+fuzzSeg, len(img))])
	}
	return fs
}

// validPrefix parses the segments of fs from offset 0 to end with its own
// reading of the frame format, failing unless every record has a valid
// CRC32-C and stores its own offset, and unless end is where a record or
// segment ends.
func validPrefix(t testing.TB, fs vfs.FS, end int64) int {
	t.Helper()
	table := crc32.MakeTable(crc32.Castagnoli)
	records := 0
	for seg := int64(0); seg < end; seg += fuzzSeg {
		b := readFile(t, fs, filepath.Join("/cl", segmentName(seg)))
		if len(b) != fuzzSeg {
			t.Fatalf("segment %d is %d bytes", seg, len(b))
		}
		pos := int64(0)
		for seg+pos < end && pos < fuzzSeg {
			size, magic := int64(le.Uint32(b[pos:])), le.Uint32(b[pos+4:])
			if magic == BlankMagic {
				if size != fuzzSeg-pos || le.Uint32(b[pos+8:]) != crc32.Checksum(b[pos:pos+8], table) {
					t.Fatalf("bad blank marker at %d+%d below the end %d", seg, pos, end)
				}
				if end < seg+fuzzSeg {
					t.Fatalf("the end %d is inside the blank marker at %d+%d", end, seg, pos)
				}
				pos = fuzzSeg
				break
			}
			if magic != MagicV1 || size < FrameSize || pos+size > fuzzSeg {
				t.Fatalf("no record at %d+%d below the end %d", seg, pos, end)
			}
			rec := b[pos : pos+size]
			c := crc32.Update(crc32.Update(0, table, rec[:8]), table, rec[12:])
			if c != le.Uint32(rec[8:]) || int64(le.Uint64(rec[12:])) != seg+pos {
				t.Fatalf("invalid record at %d+%d below the end %d", seg, pos, end)
			}
			records++
			pos += size
		}
		if seg+pos > end && pos < fuzzSeg {
			t.Fatalf("the end %d is inside the record at %d+%d", end, seg, pos)
		}
	}
	return records
}

// FuzzRecoverSegment opens a log whose segments hold arbitrary (mostly
// mutated real) bytes. Open never panics; it either fails with a typed
// error (ErrCorrupt) and is stable about it, or recovers a valid prefix
// (every record checksummed and at its own offset, zeros after it) that a
// second Open leaves exactly as it is.
func FuzzRecoverSegment(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add(make([]byte, 100), uint16(0))
	for i, n := range []int{1, 5, 12, 30} {
		img := fuzzImage(f, n, uint64(i))
		f.Add(img, uint16(0))
		f.Add(img, uint16(len(img)))
		torn := append([]byte(nil), img[:len(img)-7]...)
		f.Add(torn, uint16(len(img)/2))
		flipped := append([]byte(nil), img...)
		flipped[len(img)/3] ^= 0x40
		f.Add(flipped, uint16(len(img)))
		f.Add(append(append([]byte(nil), img...), 0xde, 0xad, 0xbe, 0xef), uint16(0))
	}
	f.Fuzz(func(t *testing.T, img []byte, trusted uint16) {
		if len(img) > 3*fuzzSeg {
			img = img[:3*fuzzSeg]
		}
		fs := loadImage(t, img)
		opts := Options{Dir: "/cl", FS: fs, SegmentSize: fuzzSeg, NoWarm: true, RecoverFrom: 0, Trusted: int64(trusted)}
		l, err := Open(opts)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed with an untyped error: %v", err)
			}
			// Stable: the failed Open changed nothing that matters.
			if _, err2 := Open(opts); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("a second Open disagrees: %v, then %v", err, err2)
			}
			return
		}
		rep := l.Report()
		end := l.WrotePosition()
		if rep.End != end {
			t.Fatalf("report end %d, log end %d", rep.End, end)
		}
		n := 0
		if _, err := l.Scan(0, end, true, func(Record) error { n++; return nil }); err != nil {
			t.Fatalf("scan of the recovered log: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := validPrefix(t, fs, end); got != n {
			t.Fatalf("independent parse found %d records, the log %d", got, n)
		}
		// Past the end: zeros to the end of its segment, and no later segment.
		if pos := end % fuzzSeg; pos != 0 || end == 0 {
			last := readFile(t, fs, filepath.Join("/cl", segmentName(end-pos)))
			if !isZero(last[pos:]) {
				t.Fatalf("non-zero bytes after the recovered end %d", end)
			}
		}
		if vfs.Exists(fs, filepath.Join("/cl", segmentName((end/fuzzSeg+1)*fuzzSeg))) {
			t.Fatalf("a segment after the recovered end %d survived", end)
		}
		// Idempotent.
		l2, err := Open(opts)
		if err != nil {
			t.Fatalf("reopening the recovered log: %v", err)
		}
		defer l2.Close()
		rep2 := l2.Report()
		if rep2.End != end || rep2.TruncatedBytes != 0 || rep2.DroppedRecords != 0 || rep2.RemovedSegments != 0 {
			t.Fatalf("recovery is not idempotent: %+v then %+v", rep, rep2)
		}
	})
}

// FuzzReadAt reads at arbitrary offsets of a real log: a record start reads
// back, anything else is ErrNotFound or ErrCorrupt, and nothing panics or
// fences the log.
func FuzzReadAt(f *testing.F) {
	img := fuzzImage(f, 40, 99)
	fs := loadImage(f, img)
	l, err := Open(Options{Dir: "/cl", FS: fs, SegmentSize: fuzzSeg, NoWarm: true, RecoverFrom: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	starts := map[int64]bool{}
	if _, err := l.Scan(0, l.WrotePosition(), true, func(r Record) error { starts[r.Offset] = true; return nil }); err != nil {
		f.Fatal(err)
	}
	for off := range starts {
		f.Add(off)
		f.Add(off + 1)
	}
	for s := int64(fuzzSeg); s < l.WrotePosition(); s += fuzzSeg {
		for d := int64(1); d <= BlankSize; d++ {
			f.Add(s - d) // inside end-of-segment markers
		}
	}
	f.Add(int64(-1))
	f.Add(l.WrotePosition())
	f.Fuzz(func(t *testing.T, off int64) {
		err := l.Read(off, func(r Record) error {
			if r.Offset != off || r.Size < FrameSize {
				return fmt.Errorf("record %+v read at %d", r, off)
			}
			return nil
		})
		switch {
		case starts[off]:
			if err != nil {
				t.Fatalf("record at %d: %v", off, err)
			}
		case err == nil:
			t.Fatalf("offset %d is no record start but read", off)
		case !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt):
			t.Fatalf("offset %d: untyped error %v", off, err)
		}
		if l.Fenced() != nil {
			t.Fatal("a read fenced the log")
		}
	})
}
