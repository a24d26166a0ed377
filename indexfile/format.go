package indexfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Format constants. They are frozen: changing any of them is a new
// FormatVersion.
const (
	// FormatVersion is the version this package writes and reads.
	FormatVersion = 1
	// HeaderSize is the size of a file header in bytes.
	HeaderSize = 64
	// SlotSize is the size of one hash slot in bytes.
	SlotSize = 4
	// EntrySize is the size of one index entry in bytes.
	EntrySize = 24

	// DefaultSlots is the slot count of a new file when Options.Slots is 0.
	DefaultSlots = 1 << 20
	// DefaultEntries is the entry capacity of a new file when
	// Options.Entries is 0.
	DefaultEntries = 4_000_000
	// MaxSlots bounds Options.Slots and the slot count read from a header.
	MaxSlots = 1 << 26
	// MaxEntries bounds Options.Entries and the capacity read from a header.
	MaxEntries = 1 << 26
)

const (
	magic = "MQIX"

	// Header field offsets.
	hMagic     = 0
	hVersion   = 4
	hFlags     = 6
	hSlots     = 8
	hEntries   = 12
	hBeginTime = 16
	hEndTime   = 24
	hBeginPhys = 32
	hEndPhys   = 40
	hUsedSlots = 48
	hCount     = 52
	hFlushed   = 56
	hCRC       = 60

	// flagDirty: the file may hold changes made after its last Flush.
	flagDirty = 1

	// Entry field offsets.
	eHash = 0
	ePhys = 4
	eTime = 12
	ePrev = 16
	eCRC  = 20

	// maxStoreTime bounds store times (ms) so that time arithmetic never
	// overflows; it is about 285,000 years after 1970.
	maxStoreTime = 1 << 53

	nameLen = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FileSize returns the size in bytes of an index file with the given slot
// count and entry capacity.
func FileSize(slots, entries int) int64 {
	return HeaderSize + int64(slots)*SlotSize + int64(entries)*EntrySize
}

// fileName is the 20-digit zero-padded begin commitlog offset.
func fileName(beginPhys int64) string { return fmt.Sprintf("%020d", beginPhys) }

// parseName returns the begin offset a file name encodes, or false for a
// name this package does not own.
func parseName(name string) (int64, bool) {
	if len(name) != nameLen {
		return 0, false
	}
	for i := 0; i < nameLen; i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// keyHash is xxhash64 of the key folded to 32 bits; 0 is never returned, so
// a zeroed entry never carries a valid hash.
func keyHash(key string) uint32 { return foldHash(xxhash.Sum64String(key)) }

func foldHash(h uint64) uint32 {
	v := uint32(h) ^ uint32(h>>32)
	if v == 0 {
		v = 1
	}
	return v
}

// header is the decoded file header.
type header struct {
	version   uint16
	flags     uint16
	slots     uint32
	entries   uint32
	beginTime int64
	endTime   int64
	beginPhys int64
	endPhys   int64
	usedSlots uint32
	count     uint32
	flushed   uint32
}

func (h *header) encode(b []byte) {
	le := binary.LittleEndian
	copy(b[hMagic:], magic)
	le.PutUint16(b[hVersion:], h.version)
	le.PutUint16(b[hFlags:], h.flags)
	le.PutUint32(b[hSlots:], h.slots)
	le.PutUint32(b[hEntries:], h.entries)
	le.PutUint64(b[hBeginTime:], uint64(h.beginTime))
	le.PutUint64(b[hEndTime:], uint64(h.endTime))
	le.PutUint64(b[hBeginPhys:], uint64(h.beginPhys))
	le.PutUint64(b[hEndPhys:], uint64(h.endPhys))
	le.PutUint32(b[hUsedSlots:], h.usedSlots)
	le.PutUint32(b[hCount:], h.count)
	le.PutUint32(b[hFlushed:], h.flushed)
	le.PutUint32(b[hCRC:], crc32.Checksum(b[:hCRC], castagnoli))
}

// reasonVersion is the reason decodeHeader gives for a format version other
// than FormatVersion.
const reasonVersion = "unsupported format version"

// decodeHeader checks magic, CRC and version, in that order, and decodes
// the fields. A non-empty reason means the header is unusable. The CRC
// comes before the version: a damaged version field is damage (a
// *CorruptError for the caller), and only a header whose checksum holds
// names another format version (reasonVersion). The header's size and the
// CRC's place are frozen for every version, so that this holds.
func decodeHeader(b []byte) (h header, reason string) {
	le := binary.LittleEndian
	if len(b) < HeaderSize {
		return h, "short header"
	}
	if string(b[hMagic:hMagic+4]) != magic {
		return h, "bad magic"
	}
	h.version = le.Uint16(b[hVersion:])
	if crc32.Checksum(b[:hCRC], castagnoli) != le.Uint32(b[hCRC:]) {
		return h, "header checksum mismatch"
	}
	if h.version != FormatVersion {
		return h, reasonVersion
	}
	h.flags = le.Uint16(b[hFlags:])
	h.slots = le.Uint32(b[hSlots:])
	h.entries = le.Uint32(b[hEntries:])
	h.beginTime = int64(le.Uint64(b[hBeginTime:]))
	h.endTime = int64(le.Uint64(b[hEndTime:]))
	h.beginPhys = int64(le.Uint64(b[hBeginPhys:]))
	h.endPhys = int64(le.Uint64(b[hEndPhys:]))
	h.usedSlots = le.Uint32(b[hUsedSlots:])
	h.count = le.Uint32(b[hCount:])
	h.flushed = le.Uint32(b[hFlushed:])
	return h, ""
}

// check validates the fields of a header whose CRC matched, for a file of
// size bytes named by beginPhys. It returns a reason, or "".
func (h *header) check(size, name int64) string {
	switch {
	case h.flags&^flagDirty != 0:
		return "unknown header flags"
	case h.slots == 0 || h.slots > MaxSlots:
		return "slot count out of range"
	case h.entries == 0 || h.entries > MaxEntries:
		return "entry capacity out of range"
	case FileSize(int(h.slots), int(h.entries)) != size:
		return "file size does not match slot count and entry capacity"
	case h.count == 0 || h.count > h.entries+1:
		return "index count out of range"
	case h.flushed == 0 || h.flushed > h.count:
		return "flushed count out of range"
	case h.usedSlots > h.slots || h.usedSlots >= h.count:
		return "used slot count out of range"
	case h.beginPhys != name:
		return "begin offset does not match the file name"
	case h.endPhys < h.beginPhys:
		return "end offset before begin offset"
	case h.beginTime < 0 || h.beginTime > maxStoreTime || h.endTime < h.beginTime || h.endTime > maxStoreTime:
		return "time range out of order"
	}
	return ""
}

// entry is a decoded index entry.
type entry struct {
	hash uint32
	phys int64
	secs uint32 // seconds since the file's begin time
	prev uint32
}

func putEntry(b []byte, e entry) {
	le := binary.LittleEndian
	b = b[:EntrySize]
	le.PutUint32(b[eHash:], e.hash)
	le.PutUint64(b[ePhys:], uint64(e.phys))
	le.PutUint32(b[eTime:], e.secs)
	le.PutUint32(b[ePrev:], e.prev)
	le.PutUint32(b[eCRC:], crc32.Checksum(b[:eCRC], castagnoli))
}

// readEntry decodes b[:EntrySize]; false means a checksum mismatch, a zero
// hash or a negative offset.
func readEntry(b []byte) (entry, bool) {
	le := binary.LittleEndian
	b = b[:EntrySize]
	if crc32.Checksum(b[:eCRC], castagnoli) != le.Uint32(b[eCRC:]) {
		return entry{}, false
	}
	e := entry{
		hash: le.Uint32(b[eHash:]),
		phys: int64(le.Uint64(b[ePhys:])),
		secs: le.Uint32(b[eTime:]),
		prev: le.Uint32(b[ePrev:]),
	}
	return e, e.hash != 0 && e.phys >= 0
}

// secsSince converts a store time to whole seconds since begin, clamped to
// [0, MaxUint32].
func secsSince(begin, t int64) uint32 {
	d := (t - begin) / 1000
	if d < 0 {
		return 0
	}
	if d > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(d)
}

// Slots are read and written with atomics through the mapping: the writer
// updates them while readers walk chains. The mapping is page aligned (OS)
// or a Go allocation of at least 8-byte alignment (memory), and slots start
// at HeaderSize, so every slot is 4-byte aligned; openFile checks it.
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

func slotPtr(b []byte, i uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&b[HeaderSize+int(i)*SlotSize]))
}

func loadSlot(b []byte, i uint32) uint32 {
	v := atomic.LoadUint32(slotPtr(b, i))
	if bigEndian {
		v = bits.ReverseBytes32(v)
	}
	return v
}

func storeSlot(b []byte, i uint32, v uint32) {
	if bigEndian {
		v = bits.ReverseBytes32(v)
	}
	atomic.StoreUint32(slotPtr(b, i), v)
}
