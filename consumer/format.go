package consumer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"path/filepath"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/internal/vfs"
)

// Config files. Each is replaced atomically (temp file, fsync, rename,
// fsync the directory) and framed so that damage is detected:
//
//	pos  size  field
//	  0     4  MAGIC    uint32 little-endian, one per file (below)
//	  4     2  VERSION  uint16, FormatVersion (1)
//	  6     2  FLAGS    uint16, 0
//	  8     4  LENGTH   uint32, bytes of BODY
//	 12     4  CRC      uint32, CRC32-C (Castagnoli) of bytes [0,12) and BODY
//	 16     …  BODY     JSON
//
// A file whose magic, version, length or CRC is wrong is refused with an
// ErrCorrupt that names it; nothing is changed (the Manager does not open).
const (
	// OffsetsFile holds committed offsets per (group, instance, topic, queue).
	OffsetsFile = "consumer_offsets"
	// GroupsFile holds each group's config and subscriptions.
	GroupsFile = "consumer_groups"

	// OffsetsMagic is "MQCO" read little-endian.
	OffsetsMagic uint32 = 0x4F43514D
	// GroupsMagic is "MQCG" read little-endian.
	GroupsMagic uint32 = 0x4743514D
	// FormatVersion is the version this package writes and reads.
	FormatVersion uint16 = 1

	headerSize  = 16
	maxBodySize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeFile frames body (the JSON of v).
func encodeFile(magic uint32, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := make([]byte, headerSize+len(body))
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint16(b[4:], FormatVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(body)))
	copy(b[headerSize:], body)
	crc := crc32.Update(crc32.Checksum(b[:12], castagnoli), castagnoli, body)
	binary.LittleEndian.PutUint32(b[12:], crc)
	return b, nil
}

// decodeFile checks the frame of b (read from path) and unmarshals its body
// into v. Every failure is an ErrCorrupt naming path.
func decodeFile(path string, magic uint32, b []byte, v any) error {
	if len(b) < headerSize {
		return errs.Corrupt(path, 0, "%d bytes, shorter than the %d-byte header", len(b), headerSize)
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != magic {
		return errs.Corrupt(path, 0, "magic %#08x, want %#08x", m, magic)
	}
	if ver := binary.LittleEndian.Uint16(b[4:]); ver != FormatVersion {
		return errs.Corrupt(path, 4, "format version %d is not supported (this build reads version %d)", ver, FormatVersion)
	}
	if f := binary.LittleEndian.Uint16(b[6:]); f != 0 {
		return errs.Corrupt(path, 6, "unknown flags %#04x", f)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n > maxBodySize || int64(n) != int64(len(b)-headerSize) {
		return errs.Corrupt(path, 8, "body length %d, but the file holds %d bytes after the header", n, len(b)-headerSize)
	}
	body := b[headerSize:]
	want := binary.LittleEndian.Uint32(b[12:])
	if got := crc32.Update(crc32.Checksum(b[:12], castagnoli), castagnoli, body); got != want {
		return errs.Corrupt(path, 12, "CRC32-C %#08x, stored %#08x", got, want)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errs.Corrupt(path, headerSize, "body: %v", err)
	}
	return nil
}

// readConfig loads dir/name into v. A missing file leaves v untouched and
// returns found = false.
func readConfig(fs vfs.FS, dir, name string, magic uint32, v any) (found bool, err error) {
	path := filepath.Join(dir, name)
	b, err := vfs.ReadFile(fs, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, decodeFile(path, magic, b, v)
}
