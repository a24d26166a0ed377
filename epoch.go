package mqlite

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// The epoch file records a store's identity and the history of its
// primaries: every term a store served as primary (an epoch) with the
// CommitLog offset where its records begin, as RocketMQ's controller mode
// keeps in its epoch file. Two stores whose histories share an epoch with
// the same start hold the same bytes up to the first place one of them
// moved on to another epoch; past it they diverge (see divergence).
//
// It is written only once a store takes part in replication (ServeReplica,
// ReplicateFrom, Promote): a store never replicated has none. Layout,
// little-endian, replaced atomically:
//
//	header, 32 bytes:
//	[0:4)   magic "MQEP"
//	[4:8)   version (1)
//	[8:24)  store ID: 16 random bytes, shared by a primary and its replicas
//	[24:28) number of epoch records
//	[28:32) CRC32-C of [0:28)
//	then per epoch, 20 bytes:
//	[0:8)   epoch number (>= 1, increasing)
//	[8:16)  CommitLog offset of the epoch's first record (non-decreasing)
//	[16:20) CRC32-C of [0:16)
const (
	epochFile       = "epochs"
	epochMagic      = 0x5045514D // "MQEP"
	epochVersion    = 1
	epochHeaderSize = 32
	epochRecordSize = 20
	maxEpochs       = 1 << 16
)

// StoreID identifies a replicated store: a primary and its replicas share
// it (a new replica takes its primary's); zero means none yet.
type StoreID [16]byte

// String returns the ID in hex.
func (id StoreID) String() string { return hex.EncodeToString(id[:]) }

func (id StoreID) isZero() bool { return id == StoreID{} }

func newStoreID() (StoreID, error) {
	var id StoreID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("mqlite: new store ID: %w (%w)", errs.ErrIO, err)
	}
	return id, nil
}

// Epoch is one primary term: its number and the CommitLog offset where
// its records begin.
type Epoch struct {
	Number int64
	Start  int64
}

// epochState is the content of the epoch file.
type epochState struct {
	id     StoreID
	epochs []Epoch
}

func (e epochState) last() Epoch {
	if len(e.epochs) == 0 {
		return Epoch{}
	}
	return e.epochs[len(e.epochs)-1]
}

// endOf is where epoch i of e ends in a log that ends at end.
func (e epochState) endOf(i int, end int64) int64 {
	if i+1 < len(e.epochs) {
		return e.epochs[i+1].Start
	}
	return end
}

func encodeEpochs(e epochState) []byte {
	b := make([]byte, epochHeaderSize+epochRecordSize*len(e.epochs))
	le := binary.LittleEndian
	le.PutUint32(b[0:], epochMagic)
	le.PutUint32(b[4:], epochVersion)
	copy(b[8:24], e.id[:])
	le.PutUint32(b[24:], uint32(len(e.epochs)))
	le.PutUint32(b[28:], crc32.Checksum(b[:28], crcTable))
	for i, ep := range e.epochs {
		r := b[epochHeaderSize+i*epochRecordSize:]
		le.PutUint64(r[0:], uint64(ep.Number))
		le.PutUint64(r[8:], uint64(ep.Start))
		le.PutUint32(r[16:], crc32.Checksum(r[:16], crcTable))
	}
	return b
}

// decodeEpochs checks and decodes the epoch file's bytes; path names the
// file in errors.
func decodeEpochs(path string, b []byte) (epochState, error) {
	var e epochState
	le := binary.LittleEndian
	if len(b) < epochHeaderSize {
		return e, errs.Corrupt(path, 0, "epoch file of %d bytes, shorter than its header", len(b))
	}
	switch {
	case le.Uint32(b[0:]) != epochMagic:
		return e, errs.Corrupt(path, 0, "bad magic %#x", le.Uint32(b[0:]))
	case le.Uint32(b[4:]) != epochVersion:
		return e, errs.Corrupt(path, 4, "unknown version %d", le.Uint32(b[4:]))
	case le.Uint32(b[28:]) != crc32.Checksum(b[:28], crcTable):
		return e, errs.Corrupt(path, 28, "header checksum mismatch")
	}
	n := int(le.Uint32(b[24:]))
	if n > maxEpochs || len(b) != epochHeaderSize+n*epochRecordSize {
		return e, errs.Corrupt(path, 24, "%d epochs in a file of %d bytes", n, len(b))
	}
	copy(e.id[:], b[8:24])
	for i := range n {
		at := epochHeaderSize + i*epochRecordSize
		r := b[at:]
		if le.Uint32(r[16:]) != crc32.Checksum(r[:16], crcTable) {
			return e, errs.Corrupt(path, int64(at), "epoch %d: checksum mismatch", i)
		}
		ep := Epoch{Number: int64(le.Uint64(r[0:])), Start: int64(le.Uint64(r[8:]))}
		if ep.Number < 1 || ep.Start < 0 || i > 0 && (ep.Number <= e.epochs[i-1].Number || ep.Start < e.epochs[i-1].Start) {
			return e, errs.Corrupt(path, int64(at), "epoch %d (%d at %d) out of order", i, ep.Number, ep.Start)
		}
		e.epochs = append(e.epochs, ep)
	}
	return e, nil
}

// loadEpochs reads the epoch file of the store in dir; found is false
// when it does not exist.
func loadEpochs(fs vfs.FS, dir string) (e epochState, found bool, err error) {
	path := filepath.Join(dir, epochFile)
	b, err := vfs.ReadFile(fs, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("mqlite: read %s: %w (%w)", path, errs.ErrIO, err)
	}
	e, err = decodeEpochs(path, b)
	return e, err == nil, err
}

// saveEpochs replaces the epoch file atomically.
func saveEpochs(fs vfs.FS, dir string, e epochState) error {
	if err := vfs.WriteFileAtomic(fs, dir, epochFile, encodeEpochs(e)); err != nil {
		return fmt.Errorf("mqlite: write %s: %w (%w)", filepath.Join(dir, epochFile), errs.ErrIO, err)
	}
	return nil
}
