package commitlog

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
)

// Records calls fn for each record of b, whole frames as ReadRaw returns
// them and AppendRaw accepted at offset off, in order, skipping an
// end-of-segment marker; each Record's Offset is its place in the log
// and its Payload aliases b. It is for a replica that indexes a chunk from
// the bytes it received instead of reading them back through the mapping:
// the frames' structure and CRC32-C were checked by AppendRaw, so it
// checks only that each frame's size fits (ErrCorrupt otherwise, never a
// panic). It returns the offset after the last frame visited, or the
// offset of the record fn failed on with fn's error.
func Records(off int64, b []byte, fn func(Record) error) (next int64, err error) {
	next = off
	for p := 0; p < len(b); {
		f := b[p:]
		if len(f) < BlankSize {
			return next, fmt.Errorf("mqlite/commitlog: chunk at %d: %d bytes left, no frame fits: %w", next, len(f), errs.ErrCorrupt)
		}
		size, magic := int(le.Uint32(f[0:])), le.Uint32(f[4:])
		if magic == BlankMagic {
			if size != len(f) {
				return next, fmt.Errorf("mqlite/commitlog: chunk at %d: an end-of-segment marker of %d bytes, %d left: %w", next, size, len(f), errs.ErrCorrupt)
			}
			return next + int64(size), nil
		}
		if magic != MagicV1 || size < FrameSize || size > len(f) {
			return next, fmt.Errorf("mqlite/commitlog: chunk at %d: no record frame (magic %#x, size %d): %w", next, magic, size, errs.ErrCorrupt)
		}
		if err := fn(Record{Offset: next, Size: size, Payload: f[FrameSize:size]}); err != nil {
			return next, err
		}
		p += size
		next += int64(size)
	}
	return next, nil
}
