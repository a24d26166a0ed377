package mqlite

// The mutation scripts of FuzzOpenCorruptedDir: what a fuzz input does to
// a copy of the golden store.
//
// An input is a sequence of 7-byte operations (a trailing partial one is
// ignored, and so is everything past fzMaxOps operations):
//
//	byte  0     kind, modulo mutKinds
//	byte  1     file: an index into the golden store's sorted file list
//	            (directory list for mutRemoveDir), modulo its length
//	bytes 2..3  a, little-endian uint16
//	bytes 4..5  b, little-endian uint16
//	byte  6     c
//
// Files are named by the golden list, not by what earlier operations left:
// an operation on a file that is gone does nothing. What a, b and c mean
// depends on the kind (decodeOp).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"strconv"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/vfs"
)

type mutKind uint8

const (
	mutFlip       mutKind = iota // flip bit `bit` of the byte at off
	mutTruncate                  // cut the file to n bytes
	mutZero                      // zero [off, off+n)
	mutAppend                    // append data
	mutDelete                    // remove the file
	mutDuplicate                 // copy the file to target
	mutRename                    // move the file to target (replacing it)
	mutCheckpoint                // rewrite the checkpoint, checksum valid, with flushed and dispatched (version 1, or 2 with the golden queue marks)
	mutOffsets                   // byte damage to the consumer offsets file (decodes to one of the above)
	mutRemoveDir                 // remove a directory and everything under it
	mutKinds
)

var mutNames = [...]string{"flip", "truncate", "zero", "append", "delete", "duplicate", "rename", "checkpoint", "offsets", "rmdir"}

func (k mutKind) String() string { return mutNames[k] }

const (
	fzOpSize = 7
	fzMaxOps = 8
)

// mutation is one decoded operation on a store directory.
type mutation struct {
	kind   mutKind
	file   string // the file (or directory) it applies to
	off, n int64
	bit    uint8
	data   []byte // mutAppend
	target string // mutDuplicate, mutRename
	// flushed and dispatched are the checkpoint's fields (mutCheckpoint),
	// and marks its queue marks, taken at marksAt.
	flushed, dispatched, marksAt int64
	marks                        []queueMark
}

func (m mutation) String() string {
	switch m.kind {
	case mutFlip:
		return fmt.Sprintf("flip %s@%d bit %d", m.file, m.off, m.bit)
	case mutTruncate:
		return fmt.Sprintf("truncate %s to %d", m.file, m.n)
	case mutZero:
		return fmt.Sprintf("zero %s [%d, %d)", m.file, m.off, m.off+m.n)
	case mutAppend:
		return fmt.Sprintf("append %d bytes to %s", len(m.data), m.file)
	case mutDuplicate, mutRename:
		return fmt.Sprintf("%s %s to %s", m.kind, m.file, m.target)
	case mutCheckpoint:
		return fmt.Sprintf("checkpoint flushed %d dispatched %d marks %v at %d", m.flushed, m.dispatched, m.marks, m.marksAt)
	}
	return fmt.Sprintf("%s %s", m.kind, m.file)
}

// fzOp encodes one operation of a script.
func fzOp(k mutKind, file int, a, b uint16, c byte) []byte {
	op := []byte{byte(k), byte(file), 0, 0, 0, 0, c}
	binary.LittleEndian.PutUint16(op[2:], a)
	binary.LittleEndian.PutUint16(op[4:], b)
	return op
}

// decodeScript turns a fuzz input into mutations.
func (g *fzGolden) decodeScript(data []byte) []mutation {
	var out []mutation
	for i := 0; i+fzOpSize <= len(data) && i < fzMaxOps*fzOpSize; i += fzOpSize {
		op := data[i : i+fzOpSize]
		if m, ok := g.decodeOp(mutKind(op[0]%byte(mutKinds)), int(op[1]),
			binary.LittleEndian.Uint16(op[2:]), binary.LittleEndian.Uint16(op[4:]), op[6]); ok {
			out = append(out, m)
		}
	}
	return out
}

func (g *fzGolden) decodeOp(k mutKind, f int, a, b uint16, c byte) (mutation, bool) {
	if k == mutRemoveDir {
		dirs := g.dirs[1:] // not the store's own directory: an empty one is a new store
		return mutation{kind: k, file: dirs[f%len(dirs)]}, true
	}
	if k == mutOffsets {
		p := path.Join(fzDir, configDir, consumer.OffsetsFile)
		return g.decodeOp([...]mutKind{mutFlip, mutTruncate, mutZero, mutAppend}[c%4], g.fileIndex(p), a, b, c>>2)
	}
	m := mutation{kind: k, file: g.files[f%len(g.files)]}
	size := g.sizes[m.file]
	switch k {
	case mutFlip, mutZero:
		if size == 0 {
			return m, false
		}
		m.off, m.bit = int64(a)%size, c&7
		m.n = 1 + int64(b)%(size-m.off)
	case mutTruncate:
		m.n = int64(a) % (size + 1)
	case mutAppend:
		m.data = make([]byte, 1+int(b)%4096)
		if c != 0 {
			rng := rand.New(rand.NewPCG(uint64(a), uint64(c)))
			for i := range m.data {
				m.data[i] = byte(rng.Uint32())
			}
		}
	case mutDuplicate, mutRename:
		m.target = g.targetName(m.file, a, b)
		if m.target == m.file {
			return m, false
		}
	case mutCheckpoint:
		m.file = path.Join(fzDir, checkpointName)
		cp := g.checkpoint
		value := func(base int64) int64 {
			switch (c >> 2) & 3 {
			case 0:
				return base + int64(int16(a))
			case 1:
				return base + int64(int16(a))*commitlog.MinSegmentSize
			case 2:
				return int64(a)<<16 | int64(b)
			}
			return 1<<62 + int64(a)
		}
		if c&1 != 0 {
			cp.flushed = value(cp.flushed)
		}
		if c&2 != 0 {
			cp.dispatched = value(cp.dispatched)
		}
		m.flushed, m.dispatched = cp.flushed, cp.dispatched
		if c&0x10 != 0 {
			m.marks, m.marksAt = cp.marks, cp.marksAt
		}
	}
	return m, true
}

func (g *fzGolden) fileIndex(p string) int {
	for i, f := range g.files {
		if f == p {
			return i
		}
	}
	panic("no golden file " + p)
}

// targetName picks a name that a store could hold, for a copy or a move
// of file: a neighbour of a 20-digit name, the same name in another
// directory, another file of the store, a temporary or spare name, or a
// name the store gives a meaning to.
func (g *fzGolden) targetName(file string, a, b uint16) string {
	dir, base := path.Split(file)
	switch b % 5 {
	case 0:
		if start, err := strconv.ParseInt(base, 10, 64); err == nil && len(base) == 20 {
			unit := max(g.sizes[file], 1)
			if a&0x100 != 0 {
				unit = 1
			}
			n := start + int64(int8(a))*unit
			if n < 0 || n == start {
				n = start + unit
			}
			return path.Join(dir, fmt.Sprintf("%020d", n))
		}
		fallthrough
	case 1:
		return path.Join(g.dirs[int(a)%len(g.dirs)], base)
	case 2:
		return g.files[int(a)%len(g.files)]
	case 3:
		return file + [...]string{".tmp", ".spare", ".bak", ".deleted"}[a%4]
	}
	return path.Join(dir, [...]string{"00000000000000000000", abortName, checkpointName, "meta", "readers", "x"}[a%6])
}

// apply performs m on the copy of the golden store in dir on fs. An
// operation on a file that an earlier one removed does nothing.
func (m mutation) apply(fs vfs.FS, dir string) error {
	file, target := rebase(m.file, dir), rebase(m.target, dir)
	if m.kind == mutRemoveDir {
		return fs.RemoveAll(file)
	}
	if m.kind == mutCheckpoint {
		if m.marks == nil { // as a store last closed before queue marks wrote it
			return writeWhole(fs, file, encodeV1(m.flushed, m.dispatched))
		}
		return writeWhole(fs, file, checkpoint{flushed: m.flushed, dispatched: m.dispatched, marks: m.marks, marksAt: m.marksAt}.encode())
	}
	b, err := vfs.ReadFile(fs, file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch m.kind {
	case mutFlip:
		if m.off < int64(len(b)) {
			b[m.off] ^= 1 << m.bit
		}
	case mutTruncate:
		b = b[:min(m.n, int64(len(b)))]
	case mutZero:
		if m.off < int64(len(b)) {
			clear(b[m.off:min(m.off+m.n, int64(len(b)))])
		}
	case mutAppend:
		b = append(b, m.data...)
	case mutDelete:
		return fs.Remove(file)
	case mutDuplicate, mutRename:
		if _, isDir, err := fs.Stat(path.Dir(target)); err != nil || !isDir {
			return nil // an earlier operation removed the directory
		}
		if _, isDir, err := fs.Stat(target); err == nil && isDir {
			return nil
		}
		if m.kind == mutRename {
			return fs.Rename(file, target)
		}
		return writeWhole(fs, target, b)
	}
	return writeWhole(fs, file, b)
}
