package mqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/internal/vfs"
)

// The checkpoint file records how far the CommitLog is known durable and
// how far the derived indexes are built, so recovery knows where to start.
//
//	pos  size  field
//	  0     4  magic "MQCK"
//	  4     4  version (1)
//	  8     8  flushed: CommitLog durably flushed through here
//	 16     8  dispatched: ConsumeQueue and IndexFile built through here
//	 24     8  reserved (0)
//	 32     4  CRC32-C of bytes [0, 32)
//
// It is replaced atomically (temp file, sync, rename, sync dir).
const (
	checkpointName    = "checkpoint"
	checkpointMagic   = 0x4B43514D // "MQCK" little-endian
	checkpointVersion = 1
	checkpointSize    = 36
)

type checkpoint struct {
	flushed    int64
	dispatched int64
}

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], checkpointMagic)
	le.PutUint32(b[4:], checkpointVersion)
	le.PutUint64(b[8:], uint64(c.flushed))
	le.PutUint64(b[16:], uint64(c.dispatched))
	le.PutUint32(b[32:], crc32.Checksum(b[:32], crcTable))
	return b
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func decodeCheckpoint(path string, b []byte) (checkpoint, error) {
	le := binary.LittleEndian
	switch {
	case len(b) != checkpointSize:
		return checkpoint{}, errs.Corrupt(path, 0, "checkpoint is %d bytes, want %d", len(b), checkpointSize)
	case le.Uint32(b[0:]) != checkpointMagic:
		return checkpoint{}, errs.Corrupt(path, 0, "bad checkpoint magic")
	case le.Uint32(b[32:]) != crc32.Checksum(b[:32], crcTable):
		return checkpoint{}, errs.Corrupt(path, 32, "checkpoint checksum mismatch")
	case le.Uint32(b[4:]) != checkpointVersion:
		return checkpoint{}, errs.Corrupt(path, 4, "checkpoint version %d, this build reads %d", le.Uint32(b[4:]), checkpointVersion)
	}
	c := checkpoint{flushed: int64(le.Uint64(b[8:])), dispatched: int64(le.Uint64(b[16:]))}
	if c.flushed < 0 || c.dispatched < 0 {
		return checkpoint{}, errs.Corrupt(path, 8, "negative offsets in checkpoint")
	}
	return c, nil
}

// loadCheckpoint reads the checkpoint; a missing or damaged one is logged
// and treated as unknown (recovery then validates more of the log).
func (s *Store) loadCheckpoint() (checkpoint, bool) {
	path := s.path(checkpointName)
	b, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		if errors.Is(err, vfs.ErrNotExist) {
			return checkpoint{}, false
		}
		// Even if the file turns out to be missing: the error is not.
		s.opts.Logger.Warn("mqlite: cannot read checkpoint; recovering without it", "err", err)
		return checkpoint{}, false
	}
	c, err := decodeCheckpoint(path, b)
	if err != nil {
		s.opts.Logger.Warn("mqlite: damaged checkpoint; recovering without it", "err", err)
		return checkpoint{}, false
	}
	return c, true
}

func (s *Store) writeCheckpoint(c checkpoint) error {
	if err := vfs.WriteFileAtomic(s.fs, s.dir, checkpointName, c.encode()); err != nil {
		return fmt.Errorf("mqlite: write checkpoint: %w (%w)", errs.ErrIO, err)
	}
	return nil
}
