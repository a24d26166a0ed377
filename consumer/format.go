package consumer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
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
	// GroupsVersion is the newest GroupsFile version: version 2 adds the
	// topics members unsubscribed from (PushConsumer.Unsubscribe). A
	// GroupsFile without any is written as version FormatVersion, which
	// older builds read; this build reads both.
	GroupsVersion uint32 = 2

	headerSize = cfgfile.HeaderSize
)

// encodeFile frames the JSON of v.
func encodeFile(magic uint32, v any) ([]byte, error) {
	return cfgfile.Encode(magic, FormatVersion, v)
}

// groupsVersion is the version GroupsFile is written in for body: the
// oldest that can hold it.
func groupsVersion(body groupsBody) uint32 {
	for _, r := range body.Groups {
		if len(r.Unsubscribed) > 0 {
			return GroupsVersion
		}
	}
	return FormatVersion
}

// encodeGroups frames body in the version groupsVersion picks.
func encodeGroups(body groupsBody) ([]byte, error) {
	return cfgfile.Encode(GroupsMagic, groupsVersion(body), body)
}

// readGroups loads GroupsFile in either version; found is false when there
// is none. A version 1 file naming unsubscribed topics is ErrCorrupt (no
// build writes one).
func readGroups(fs vfs.FS, dir string) (body groupsBody, found bool, err error) {
	path := filepath.Join(dir, GroupsFile)
	b, err := vfs.ReadFile(fs, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return body, false, nil
	}
	if err != nil {
		return body, false, fmt.Errorf("mqlite/consumer: read %s: %w", path, errs.Disk(err))
	}
	version := GroupsVersion
	if len(b) >= 8 && binary.LittleEndian.Uint32(b[4:]) == FormatVersion {
		version = FormatVersion
	}
	if err := cfgfile.Decode(path, b, GroupsMagic, version, &body); err != nil {
		return body, false, err
	}
	if version == FormatVersion && groupsVersion(body) != FormatVersion {
		return body, false, errs.Corrupt(path, 4, "version %d file lists unsubscribed topics (version %d only)", FormatVersion, GroupsVersion)
	}
	return body, true, nil
}

// readConfig loads dir/name into v. A missing file leaves v untouched and
// returns found = false.
func readConfig(fs vfs.FS, dir, name string, magic uint32, v any) (found bool, err error) {
	return cfgfile.Read(fs, dir, name, magic, FormatVersion, v)
}
