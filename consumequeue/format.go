package consumequeue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
)

// DefaultEntriesPerFile is the number of entries per data file of a new
// queue when Options.EntriesPerFile is 0: 65,536, 1,310,720-byte files,
// so that a store of many small queues stays small. (RocketMQ's is
// 300,000, 6,000,000-byte files.) It is not a format constant: each
// queue's meta file records its own.
const DefaultEntriesPerFile = 1 << 16

// Format constants. They are frozen: changing one is a new FormatVersion.
const (
	// EntrySize is the size of one entry in bytes.
	EntrySize = 20
	// MaxEntriesPerFile bounds EntriesPerFile (1,000,000,000-byte files).
	MaxEntriesPerFile = 50_000_000
	// FormatVersion is the version written to, and required of, the meta
	// file.
	FormatVersion = 1

	metaName  = "meta"
	metaMagic = "MQCQ"
	metaSize  = 16
	nameLen   = 20 // zero-padded decimal file names

	// maxLogical keeps logical*EntrySize inside int64.
	maxLogical = math.MaxInt64/EntrySize - 1
)

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Entry is one consume queue entry: where a message's record lives in the
// CommitLog, and an opaque code for filtering.
type Entry struct {
	// Offset is the record's CommitLog (physical) offset, >= 0.
	Offset int64
	// Size is the record's total size in bytes, in [1, MaxInt32-1].
	Size int32
	// TagsCode is opaque to this package: mqlite stores a hash of the
	// message tags, or the delivery time in seconds for delay queues.
	TagsCode uint32
}

// End returns Offset+Size, the CommitLog offset just past the record.
func (e Entry) End() int64 { return e.Offset + int64(e.Size) }

// filler occupies the slots before the first entry of a queue whose first
// logical offset is not zero (RocketMQ's convention: offset 0, size MaxInt32).
// It has a valid CRC; Append refuses it as a real entry.
var filler = Entry{Offset: 0, Size: math.MaxInt32, TagsCode: 0}

// fillerBytes is the encoded filler.
var fillerBytes = func() (b [EntrySize]byte) {
	putEntry(b[:], filler)
	return b
}()

func isFiller(e Entry) bool { return e == filler }

// putEntry encodes e into b[:EntrySize].
func putEntry(b []byte, e Entry) {
	_ = b[EntrySize-1]
	le.PutUint64(b[0:8], uint64(e.Offset))
	le.PutUint32(b[8:12], uint32(e.Size))
	le.PutUint32(b[12:16], e.TagsCode)
	le.PutUint32(b[16:20], crc32.Checksum(b[:16], castagnoli))
}

// decodeEntry decodes b[:EntrySize] and reports whether it is a valid entry:
// the CRC matches, Size > 0, Offset >= 0 and Offset+Size does not overflow.
// An all-zero entry is never valid.
func decodeEntry(b []byte) (Entry, bool) {
	_ = b[EntrySize-1]
	e := Entry{Offset: int64(le.Uint64(b[0:8])), Size: int32(le.Uint32(b[8:12])), TagsCode: le.Uint32(b[12:16])}
	if le.Uint32(b[16:20]) != crc32.Checksum(b[:16], castagnoli) {
		return e, false
	}
	if e.Size <= 0 || e.Offset < 0 || e.Offset > math.MaxInt64-int64(e.Size) {
		return e, false
	}
	return e, true
}

// checkEntry validates an entry given to Append.
func checkEntry(e Entry) error {
	switch {
	case e.Offset < 0:
		return fmt.Errorf("negative offset %d: %w", e.Offset, ErrInvalidArgument)
	case e.Size <= 0 || e.Size == math.MaxInt32:
		return fmt.Errorf("size %d outside [1, %d]: %w", e.Size, math.MaxInt32-1, ErrInvalidArgument)
	case e.Offset > math.MaxInt64-int64(e.Size):
		return fmt.Errorf("offset %d + size %d overflows: %w", e.Offset, e.Size, ErrInvalidArgument)
	}
	return nil
}

// fileName names the data file starting at logical byte offset off.
func fileName(off int64) string { return fmt.Sprintf("%020d", off) }

// parseFileName reports the logical byte offset a data file name encodes.
func parseFileName(name string) (int64, bool) {
	if len(name) != nameLen {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(name, 10, 64)
	return off, err == nil
}

// encodeMeta returns the meta file for a queue with perFile entries per file:
//
//	[0:4)   magic "MQCQ"
//	[4:8)   uint32 format version
//	[8:12)  uint32 entries per file
//	[12:16) uint32 CRC32-C of [0:12)
func encodeMeta(perFile int) []byte {
	b := make([]byte, metaSize)
	copy(b, metaMagic)
	le.PutUint32(b[4:8], FormatVersion)
	le.PutUint32(b[8:12], uint32(perFile))
	le.PutUint32(b[12:16], crc32.Checksum(b[:12], castagnoli))
	return b
}

// checkMeta validates a meta file against the options and returns its
// entries per file; perFile 0 accepts any valid count. A damaged file
// (its checksum is checked before its version) is a *CorruptError; another
// version or entries-per-file is ErrIncompatible.
func checkMeta(path string, b []byte, perFile int) (int, error) {
	if len(b) < 8 || string(b[:4]) != metaMagic {
		return 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 0, "bad meta magic or length %d", len(b)))
	}
	v := le.Uint32(b[4:8])
	if len(b) != metaSize {
		// Not this version's length: its checksum cannot be checked.
		if v != FormatVersion {
			return 0, fmt.Errorf("mqlite/consumequeue: %s: format version %d, want %d: %w", path, v, FormatVersion, ErrIncompatible)
		}
		return 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 0, "meta length %d, want %d", len(b), metaSize))
	}
	// The checksum before the version: a damaged version field is damage,
	// and only a meta file whose checksum holds names another version.
	if got, want := le.Uint32(b[12:16]), crc32.Checksum(b[:12], castagnoli); got != want {
		return 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 12, "meta CRC %08x, want %08x", got, want))
	}
	if v != FormatVersion {
		return 0, fmt.Errorf("mqlite/consumequeue: %s: format version %d, want %d: %w", path, v, FormatVersion, ErrIncompatible)
	}
	n := le.Uint32(b[8:12])
	if n == 0 || n > MaxEntriesPerFile {
		return 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 8, "%d entries per file", n))
	}
	if perFile != 0 && int64(n) != int64(perFile) {
		return 0, fmt.Errorf("mqlite/consumequeue: %s: written with %d entries per file, options say %d: %w", path, n, perFile, ErrIncompatible)
	}
	return int(n), nil
}

func errCorrupt(path string, off int64, format string, args ...any) error {
	return &CorruptError{Path: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
