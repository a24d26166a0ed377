package mqlite

import (
	"fmt"
	"path/filepath"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
)

const (
	formatFile    = "store.json"
	formatMagic   = 0x4D515346 // "MQSF"
	formatVersion = 1
)

// storeFormat is what a store's files depend on and a later Open must
// agree with; it is written when the store is created.
type storeFormat struct {
	SegmentSize int64 `json:"segment_size"`
}

// adoptFormat reconciles the options with the store's recorded format: an
// option left at its default takes the recorded value; one set to another
// value is refused, since the files cannot change shape.
func (s *Store) adoptFormat(explicitSegment bool) error {
	dir := s.path(configDir)
	var f storeFormat
	found, err := cfgfile.Read(s.fs, dir, formatFile, formatMagic, formatVersion, &f)
	if err != nil {
		return err
	}
	if !found {
		if s.readOnly {
			return nil // an old store, or one being created: the options stand
		}
		return cfgfile.Write(s.fs, dir, formatFile, formatMagic, formatVersion, storeFormat{SegmentSize: s.opts.SegmentSize})
	}
	if f.SegmentSize < commitlog.MinSegmentSize || f.SegmentSize > commitlog.MaxSegmentSize {
		// Adopted, 0 would mean the default size (and grow the segments
		// to it), a negative one a negative record limit.
		return errs.Corrupt(filepath.Join(dir, formatFile), cfgfile.HeaderSize, "segment_size %d outside [%d, %d]",
			f.SegmentSize, commitlog.MinSegmentSize, int64(commitlog.MaxSegmentSize))
	}
	if f.SegmentSize != s.opts.SegmentSize {
		if explicitSegment {
			return fmt.Errorf("mqlite: open %s: the store was created with SegmentSize %d, not %d: %w",
				s.dir, f.SegmentSize, s.opts.SegmentSize, errs.ErrInvalidArgument)
		}
		s.opts.SegmentSize = f.SegmentSize
	}
	return nil
}
