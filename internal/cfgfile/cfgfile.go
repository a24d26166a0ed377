// Package cfgfile reads and writes the store's small configuration files
// (topics, consumer groups, offsets, schedule progress): a JSON body behind
// a 16-byte header, replaced atomically.
//
// Layout, little-endian:
//
//	[0:4)   magic, one per kind of file
//	[4:8)   version of that kind
//	[8:12)  length of the body
//	[12:16) CRC32-C of the body
//	[16:)   body (JSON)
//
// A file with another magic, an unknown version, a wrong length, a bad
// checksum or a body that is not JSON for the expected type (or is null) is
// an ErrCorrupt naming the file: configuration is never guessed at. Each
// loader then checks what the values mean.
package cfgfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// HeaderSize is the size of the header before the body.
const HeaderSize = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the file bytes for v.
func Encode(magic, version uint32, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("mqlite: encode config: %w", err)
	}
	return Frame(magic, version, body), nil
}

// Frame returns the file bytes for an encoded body: the header (magic,
// version, length and CRC32-C of body) followed by body. Encode frames the
// JSON of a value; tests frame bodies of their own (fuzzing the loaders
// with bodies that pass every header check).
func Frame(magic, version uint32, body []byte) []byte {
	b := make([]byte, HeaderSize+len(body))
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint32(b[4:], version)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(body, castagnoli))
	copy(b[HeaderSize:], body)
	return b
}

// Decode checks b (the contents of path) and unmarshals its body into v.
func Decode(path string, b []byte, magic, version uint32, v any) error {
	if len(b) < HeaderSize {
		return errs.Corrupt(path, 0, "%d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != magic {
		return errs.Corrupt(path, 0, "bad magic %#x, want %#x", m, magic)
	}
	if ver := le.Uint32(b[4:]); ver != version {
		return errs.Corrupt(path, 4, "unsupported version %d (this build reads version %d)", ver, version)
	}
	n := le.Uint32(b[8:])
	if int64(n) != int64(len(b)-HeaderSize) {
		return errs.Corrupt(path, 8, "body length %d, file holds %d", n, len(b)-HeaderSize)
	}
	body := b[HeaderSize:]
	if le.Uint32(b[12:]) != crc32.Checksum(body, castagnoli) {
		return errs.Corrupt(path, 12, "CRC32-C checksum mismatch")
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		// Unmarshal would leave v as it was (a map as nil): no file is
		// ever written so.
		return errs.Corrupt(path, HeaderSize, "bad body: null, not an object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errs.Corrupt(path, HeaderSize, "bad body: %v", err)
	}
	return nil
}

// Write replaces dir/name with v atomically (temporary file, sync, rename,
// sync of the directory).
func Write(fs vfs.FS, dir, name string, magic, version uint32, v any) error {
	b, err := Encode(magic, version, v)
	if err != nil {
		return err
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mqlite: create %s: %w (%w)", dir, errs.ErrIO, err)
	}
	if err := vfs.WriteFileAtomic(fs, dir, name, b); err != nil {
		return fmt.Errorf("mqlite: write %s: %w (%w)", filepath.Join(dir, name), errs.ErrIO, err)
	}
	return nil
}

// Read loads dir/name into v. It reports found == false, and no error, when
// the file does not exist.
func Read(fs vfs.FS, dir, name string, magic, version uint32, v any) (found bool, err error) {
	path := filepath.Join(dir, name)
	b, err := vfs.ReadFile(fs, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mqlite: read %s: %w (%w)", path, errs.ErrIO, err)
	}
	return true, Decode(path, b, magic, version, v)
}
