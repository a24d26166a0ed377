package consumer

import (
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/vfs"
)

// Config files. Each is replaced atomically (temp file, fsync, rename,
// fsync the directory) in the store's config file format (package
// internal/cfgfile): a 16-byte header (magic, version, body length,
// CRC32-C of the body) and a JSON body. A file whose magic, version,
// length or CRC is wrong is refused with an ErrCorrupt that names it;
// nothing is changed (the Manager does not open).
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
	FormatVersion uint32 = 1

	headerSize = cfgfile.HeaderSize
)

// encodeFile frames the JSON of v.
func encodeFile(magic uint32, v any) ([]byte, error) {
	return cfgfile.Encode(magic, FormatVersion, v)
}

// readConfig loads dir/name into v. A missing file leaves v untouched and
// returns found = false.
func readConfig(fs vfs.FS, dir, name string, magic uint32, v any) (found bool, err error) {
	return cfgfile.Read(fs, dir, name, magic, FormatVersion, v)
}
