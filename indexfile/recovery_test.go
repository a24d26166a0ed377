package indexfile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// fill puts n records (key k<i%keys>, phys i*100, t0+i s) and returns the model.
func fill(t testing.TB, x *Index, n, keys int) *model {
	t.Helper()
	m := &model{}
	for i := range n {
		p := put{fmt.Sprintf("k%d", i%keys), int64(i) * 100, t0 + int64(i)*1000}
		mustPut(t, x, p.key, p.phys, p.ts)
		m.puts = append(m.puts, p)
	}
	return m
}

// redispatch re-puts every record at or past EndPhyOffset, as the store does
// after recovery, and checks that the index then equals the model.
func redispatch(t testing.TB, x *Index, m *model, keys int) {
	t.Helper()
	end := x.EndPhyOffset()
	for _, p := range m.puts {
		if p.phys >= end {
			mustPut(t, x, p.key, p.phys, p.ts)
		}
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		eq(t, "rebuilt "+key, queryAll(t, x, key), m.want(key, 0, math.MaxInt64, 1<<20))
	}
}

func readRaw(t testing.TB, fsys vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeRaw(t testing.TB, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fixHeaderCRC(b []byte) {
	binary.LittleEndian.PutUint32(b[hCRC:], crc32.Checksum(b[:hCRC], castagnoli))
}

func entryOff(slots, n int) int { return HeaderSize + slots*SlotSize + (n-1)*EntrySize }

func TestDamagedFiles(t *testing.T) {
	// Four full files of 32 entries: 0..3100, 3200..6300, 6400..9500, 9600..12700.
	cases := []struct {
		name    string
		file    int // which file to damage
		damage  func(b []byte) []byte
		wantEnd int64 // EndPhyOffset after Open
	}{
		{"zero-length newest", 3, func(b []byte) []byte { return nil }, 9500},
		{"truncated newest", 3, func(b []byte) []byte { return b[:len(b)-1] }, 9500},
		{"header only", 3, func(b []byte) []byte { return b[:HeaderSize] }, 9500},
		{"too long", 3, func(b []byte) []byte { return append(b, 0) }, 9500},
		{"garbage header", 3, func(b []byte) []byte { copy(b, "garbage garbage garbage"); return b }, 9500},
		{"flipped header byte", 3, func(b []byte) []byte { b[hEndPhys] ^= 1; return b }, 9500},
		{"all zero", 3, func(b []byte) []byte { return make([]byte, len(b)) }, 9500},
		{"bad middle file", 1, func(b []byte) []byte { b[hCount] ^= 0x40; return b }, 3100},
		{"bad counts, good CRC", 2, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[hCount:], 1000)
			fixHeaderCRC(b)
			return b
		}, 6300},
		{"name mismatch", 2, func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[hBeginPhys:], 6500)
			fixHeaderCRC(b)
			return b
		}, 6300},
		{"overlaps previous", 1, nil, 3100}, // see below
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				o := tinyOpts(fsys, dir)
				x := mustOpen(t, o)
				m := fill(t, x, 128, 5)
				if err := x.Close(); err != nil {
					t.Fatal(err)
				}
				names := indexFiles(t, fsys, dir)
				path := filepath.Join(dir, names[c.file])
				if c.damage != nil {
					writeRaw(t, fsys, path, c.damage(readRaw(t, fsys, path)))
				} else {
					// The second file claims to begin (3000) before the
					// first ends (3100); its name agrees.
					b := readRaw(t, fsys, path)
					binary.LittleEndian.PutUint64(b[hBeginPhys:], 3000)
					fixHeaderCRC(b)
					if err := fsys.Remove(path); err != nil {
						t.Fatal(err)
					}
					writeRaw(t, fsys, filepath.Join(dir, fileName(3000)), b)
				}
				y := mustOpen(t, o)
				if got := y.EndPhyOffset(); got != c.wantEnd {
					t.Fatalf("EndPhyOffset = %d, want %d", got, c.wantEnd)
				}
				if n := len(indexFiles(t, fsys, dir)); n != c.file {
					t.Fatalf("%d files left, want %d (damaged and newer deleted)", n, c.file)
				}
				redispatch(t, y, m, 5)
			})
		})
	}
}

func TestVersionRejected(t *testing.T) {
	for _, v := range []uint16{0, 2, 0xffff} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			fsys := vfs.NewMem()
			o := tinyOpts(fsys, "/i")
			x := mustOpen(t, o)
			fill(t, x, 10, 2)
			x.Close()
			path := "/i/" + fileName(0)
			b := readRaw(t, fsys, path)
			binary.LittleEndian.PutUint16(b[hVersion:], v)
			fixHeaderCRC(b)
			writeRaw(t, fsys, path, b)
			_, err := Open(o)
			if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrVersion (matching ErrInvalidArgument, not ErrCorrupt)", err)
			}
			if !vfs.Exists(fsys, path) {
				t.Fatal("a file of another version was deleted")
			}
		})
	}
}

// TestFlippedVersionIsDamage: a damaged byte in the version field fails
// the header's CRC, which is checked first: the file is damaged, not of
// another version, and is deleted like any damaged file.
func TestFlippedVersionIsDamage(t *testing.T) {
	b := validFile(t, 20, false)
	b[hVersion] ^= 2
	if _, reason := decodeHeader(b); reason != "header checksum mismatch" {
		t.Fatalf("decodeHeader: %q, want the checksum mismatch", reason)
	}
	fsys := vfs.NewMem()
	o := tinyOpts(fsys, "/i")
	fsys.MkdirAll("/i", 0o755)
	path := "/i/" + fileName(0)
	writeRaw(t, fsys, path, b)
	x, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v, want the damaged file deleted", err)
	}
	defer x.Close()
	if vfs.Exists(fsys, path) {
		t.Fatal("the damaged file was kept")
	}
}

func TestIgnoresForeignNames(t *testing.T) {
	fsys := vfs.NewMem()
	o := tinyOpts(fsys, "/i")
	x := mustOpen(t, o)
	fill(t, x, 10, 2)
	x.Close()
	writeRaw(t, fsys, "/i/notes.txt", []byte("hello"))
	fsys.MkdirAll("/i/"+fileName(99), 0o755)
	y := mustOpen(t, o)
	if y.EndPhyOffset() != 900 || !vfs.Exists(fsys, "/i/notes.txt") {
		t.Fatal("foreign names disturbed recovery")
	}
}

// chainFile writes 6 entries of key "k" (phys 100..600) into one clean file
// with one slot and returns its path.
func chainFile(t *testing.T, fsys vfs.FS) (Options, string) {
	o := Options{FS: fsys, Dir: "/i", Slots: 1, Entries: 32}
	x := mustOpen(t, o)
	for i := 1; i <= 6; i++ {
		mustPut(t, x, "k", int64(i)*100, t0+int64(i)*1000)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	return o, "/i/" + fileName(100)
}

func TestFlippedEntryEndsChain(t *testing.T) {
	fsys := vfs.NewMem()
	o, path := chainFile(t, fsys)
	b := readRaw(t, fsys, path)
	b[entryOff(1, 3)+ePhys] ^= 0x10 // entry 3 (phys 300)
	writeRaw(t, fsys, path, b)
	x := mustOpen(t, o)
	eq(t, "chain cut at the damaged entry", queryAll(t, x, "k"), []int64{600, 500, 400})
}

func TestBadLinkEndsChain(t *testing.T) {
	fsys := vfs.NewMem()
	o, path := chainFile(t, fsys)
	b := readRaw(t, fsys, path)
	e := b[entryOff(1, 4):][:EntrySize]
	binary.LittleEndian.PutUint32(e[ePrev:], 5) // entry 4 points forward
	binary.LittleEndian.PutUint32(e[eCRC:], crc32.Checksum(e[:eCRC], castagnoli))
	writeRaw(t, fsys, path, b)
	x := mustOpen(t, o)
	eq(t, "chain cut at a link that is not smaller", queryAll(t, x, "k"), []int64{600, 500, 400})
}

func TestSlotPastCountEndsChain(t *testing.T) {
	fsys := vfs.NewMem()
	o, path := chainFile(t, fsys)
	b := readRaw(t, fsys, path)
	binary.LittleEndian.PutUint32(b[HeaderSize:], 20) // slot names an uncounted entry
	writeRaw(t, fsys, path, b)
	x := mustOpen(t, o)
	eq(t, "k", queryAll(t, x, "k"), nil)
	mustPut(t, x, "k", 700, t0+7000) // starts a new chain, no panic
	eq(t, "k", queryAll(t, x, "k"), []int64{700})
}

// TestRepairDirty: a dirty header means the file was not flushed; Open
// rolls it back to flushedCount, relinking around damaged entries.
func TestRepairDirty(t *testing.T) {
	fsys := vfs.NewMem()
	o, path := chainFile(t, fsys)
	b := readRaw(t, fsys, path)
	binary.LittleEndian.PutUint16(b[hFlags:], flagDirty)
	binary.LittleEndian.PutUint32(b[hFlushed:], 6) // entries 1..5 were flushed
	fixHeaderCRC(b)
	b[entryOff(1, 3)+eTime] ^= 1 // entry 3 damaged
	writeRaw(t, fsys, path, b)
	x := mustOpen(t, o)
	eq(t, "rolled back and relinked", queryAll(t, x, "k"), []int64{500, 400, 200, 100})
	if got := x.EndPhyOffset(); got != 500 {
		t.Fatalf("EndPhyOffset = %d, want 500", got)
	}
	mustPut(t, x, "k", 600, t0+6000)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	h, reason := decodeHeader(readRaw(t, fsys, path))
	if reason != "" || h.flags != 0 || h.count != 7 || h.flushed != 7 || h.endPhys != 600 {
		t.Fatalf("header after close: %+v %q", h, reason)
	}
	eq(t, "after reopen", queryAll(t, mustOpen(t, o), "k"), []int64{600, 500, 400, 200, 100})
}

// TestCrashImages builds power-loss images (only synced bytes plus a random
// share of unsynced pages) at random points: recovery must open them,
// return only real offsets, keep everything flushed, and rebuild exactly by
// re-dispatch from EndPhyOffset.
func TestCrashImages(t *testing.T) {
	const keys = 40
	logs := &countingHandler{counts: map[string]int{}}
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		fty := vfs.NewFaulty(vfs.NewMem())
		o := Options{FS: fty, Dir: "/s/index", Slots: 2048, Entries: 1024}
		x := mustOpen(t, o)
		m := &model{}
		flushedEnd := int64(0)
		n := 200 + rng.IntN(3000)
		for i := range n {
			phys, ts := int64(i)*100, t0+int64(i)*1000
			for range 1 + rng.IntN(3) {
				p := put{fmt.Sprintf("k%d", rng.IntN(keys)), phys, ts}
				mustPut(t, x, p.key, p.phys, p.ts)
				m.puts = append(m.puts, p)
			}
			if rng.IntN(300) == 0 {
				if err := x.Flush(); err != nil {
					t.Fatal(err)
				}
				flushedEnd = phys
			}
		}
		img := fty.Crash(rng, rng.Float64())
		o.FS = img
		o.Logger = slog.New(logs)
		y := mustOpen(t, o)
		if end := y.EndPhyOffset(); end < flushedEnd {
			t.Fatalf("seed %d: EndPhyOffset %d is below the flushed %d", seed, end, flushedEnd)
		}
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			all := m.want(key, 0, math.MaxInt64, 1<<20)
			for _, p := range queryAll(t, y, key) {
				if !slices.Contains(all, p) {
					t.Fatalf("seed %d: %s -> %d, never put", seed, key, p)
				}
			}
		}
		redispatch(t, y, m, keys)
		x.Close()
	}
	t.Logf("recovery events over all images: %v", logs.counts)
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return nil
}

func TestSyncFailureFences(t *testing.T) {
	eio := errors.New("injected EIO")
	syncFails := func(op vfs.Op, _ string) error {
		if op == vfs.OpMapSync {
			return eio
		}
		return nil
	}
	fenced := func(t *testing.T, x *Index, err error) {
		t.Helper()
		if !errors.Is(err, ErrFenced) || !errors.Is(err, eio) {
			t.Fatalf("got %v, want ErrFenced wrapping the sync error", err)
		}
		if err := x.Put("k", 3, t0); !errors.Is(err, ErrFenced) {
			t.Fatalf("Put after a failed sync: %v, want ErrFenced", err)
		}
		if err := x.Flush(); !errors.Is(err, ErrFenced) {
			t.Fatalf("Flush after a failed sync: %v, want ErrFenced", err)
		}
		eq(t, "reads still work", queryAll(t, x, "k"), []int64{2, 1})
	}
	t.Run("flush", func(t *testing.T) {
		fty := vfs.NewFaulty(vfs.NewMem())
		x := mustOpen(t, tinyOpts(fty, "/i"))
		mustPut(t, x, "k", 1, t0)
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		// Put after a Flush does not sync: the header stays dirty.
		fty.SetInjector(syncFails)
		mustPut(t, x, "k", 2, t0)
		err := x.Flush()
		fty.SetInjector(nil)
		fenced(t, x, err)
	})
	t.Run("first put after a clean close", func(t *testing.T) {
		fty := vfs.NewFaulty(vfs.NewMem())
		x := mustOpen(t, tinyOpts(fty, "/i"))
		mustPut(t, x, "k", 1, t0)
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		x = mustOpen(t, tinyOpts(fty, "/i"))
		mustPut(t, x, "k", 2, t0) // marks the clean header dirty and syncs it
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		x = mustOpen(t, tinyOpts(fty, "/i"))
		fty.SetInjector(syncFails)
		err := x.Put("k", 4, t0)
		fty.SetInjector(nil)
		if !errors.Is(err, ErrFenced) || !errors.Is(err, eio) {
			t.Fatalf("got %v, want ErrFenced wrapping the sync error", err)
		}
		fenced(t, x, x.Put("k", 5, t0))
	})
}

func TestAllocateFailureIsNotFatal(t *testing.T) {
	full := errors.New("injected ENOSPC")
	fty := vfs.NewFaulty(vfs.NewMem())
	x := mustOpen(t, tinyOpts(fty, "/i"))
	fty.SetInjector(func(op vfs.Op, _ string) error {
		if op == vfs.OpAllocate {
			return full
		}
		return nil
	})
	if err := x.Put("k", 1, t0); !errors.Is(err, full) || errors.Is(err, ErrFenced) {
		t.Fatalf("got %v, want the allocate error, not fenced", err)
	}
	if n := len(indexFiles(t, fty, "/i")); n != 0 {
		t.Fatalf("%d files left after a failed create", n)
	}
	fty.SetInjector(nil)
	mustPut(t, x, "k", 1, t0)
	eq(t, "k", queryAll(t, x, "k"), []int64{1})
}
