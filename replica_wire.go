package mqlite

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/errs"
)

// The replication wire format. A replica opens the conversation with a
// hello, the primary answers with a reply, then sends frames until either
// side closes the stream; the replica acknowledges. Little-endian.
//
//	hello (replica -> primary):
//	[0:4)   magic "MQRH"
//	[4:8)   version (2)
//	[8:12)  flags: bit 0 the replica runs FlushSync (its acks count flushed bytes)
//	[12:28) store ID (zero: a new replica)
//	[28:36) segment size
//	[36:44) end of the replica's CommitLog
//	[44:48) number of epochs n (<= 65,536)
//	[48:48+16n) epochs: number, start (8 bytes each)
//	then CRC32-C of all the above (4)
//
//	reply (primary -> replica):
//	[0:4)   magic "MQRP"
//	[4:8)   version (2)
//	[8:12)  status: 0 ok, else a refusal (replyStatus)
//	[12:28) store ID
//	[28:36) segment size
//	[36:44) start: where the stream begins; below the replica's end the
//	        replica first cuts its log back to it (divergence)
//	[44:48) number of epochs n, then n epochs as in the hello
//	then CRC32-C of all the above (4)
//
//	frame (primary -> replica), a 28-byte header and a body:
//	[0:4)   kind: 1 CommitLog chunk, 2 metadata
//	[4:12)  CommitLog offset of the chunk's first byte (metadata: 0)
//	[12:16) body length; 0 is a heartbeat
//	[16:24) the primary's CommitLog end when sent (the replica's lag)
//	[24:28) CRC32-C of [0:24) and the body; of a CommitLog chunk, only
//	        of the body's bytes its records' own CRC32-C do not cover (the
//	        rest of each end-of-segment marker, commitlog.UncoveredCRC):
//	        the replica checks each record's as it appends it, so every
//	        byte goes through one CRC pass (version 1 took the whole body)
//
//	ack (replica -> primary), 20 bytes:
//	[0:8)   end of the replica's CommitLog (written)
//	[8:16)  how far it is flushed
//	[16:20) CRC32-C of [0:16)
//
// A CommitLog chunk holds whole frames of the primary's log as stored
// (commitlog.ReadRaw): the replica checks each frame again before
// appending it at the same offset (commitlog.AppendRaw).
const (
	helloMagic   = 0x48524D51 // "QMRH" read little-endian: bytes "MQRH"
	replyMagic   = 0x50524D51 // bytes "MQRP"
	wireVersion  = 2
	flagSyncAck  = 1
	frameHeader  = 28
	ackSize      = 20
	frameChunk   = 1
	frameMeta    = 2
	maxWireEpoch = maxEpochs
	// maxMetaBody bounds a metadata frame (config files are small).
	maxMetaBody = 64 << 20
)

type replyStatus uint32

const (
	replyOK replyStatus = iota
	replyIdentity
	replyDiverged
	replyAhead
	replyGone // the primary no longer has the bytes the replica needs
	replyNotPrimary
)

func (st replyStatus) err() error {
	switch st {
	case replyOK:
		return nil
	case replyIdentity:
		return fmt.Errorf("mqlite: the primary is another store (store ID or segment size differ): %w", ErrReplicaIdentity)
	case replyDiverged:
		return fmt.Errorf("mqlite: the replica's history is not a prefix of the primary's: %w", ErrReplicaDiverged)
	case replyAhead:
		return fmt.Errorf("mqlite: the replica holds more of the primary's epoch than the primary: %w", ErrReplicaDiverged)
	case replyGone:
		return fmt.Errorf("mqlite: the primary's CommitLog no longer holds the bytes the replica needs (retention): start the replica from an empty directory: %w", errs.ErrNotFound)
	case replyNotPrimary:
		return fmt.Errorf("mqlite: the other side is not a primary: %w", ErrReplica)
	}
	return fmt.Errorf("mqlite: replication refused with unknown status %d: %w", uint32(st), errs.ErrInvalidArgument)
}

var wle = binary.LittleEndian

// hello is what a replica says first.
type hello struct {
	syncAck bool
	id      StoreID
	segment int64
	end     int64
	epochs  []Epoch
}

// reply is the primary's answer.
type reply struct {
	status  replyStatus
	id      StoreID
	segment int64
	start   int64
	epochs  []Epoch
}

func appendEpochs(b []byte, eps []Epoch) []byte {
	b = wle.AppendUint32(b, uint32(len(eps)))
	for _, e := range eps {
		b = wle.AppendUint64(b, uint64(e.Number))
		b = wle.AppendUint64(b, uint64(e.Start))
	}
	return b
}

func writeHello(w io.Writer, h hello) error {
	b := wle.AppendUint32(nil, helloMagic)
	b = wle.AppendUint32(b, wireVersion)
	var flags uint32
	if h.syncAck {
		flags |= flagSyncAck
	}
	b = wle.AppendUint32(b, flags)
	b = append(b, h.id[:]...)
	b = wle.AppendUint64(b, uint64(h.segment))
	b = wle.AppendUint64(b, uint64(h.end))
	b = appendEpochs(b, h.epochs)
	b = wle.AppendUint32(b, crc32.Checksum(b, crcTable))
	_, err := w.Write(b)
	return err
}

func writeReply(w io.Writer, r reply) error {
	b := wle.AppendUint32(nil, replyMagic)
	b = wle.AppendUint32(b, wireVersion)
	b = wle.AppendUint32(b, uint32(r.status))
	b = append(b, r.id[:]...)
	b = wle.AppendUint64(b, uint64(r.segment))
	b = wle.AppendUint64(b, uint64(r.start))
	b = appendEpochs(b, r.epochs)
	b = wle.AppendUint32(b, crc32.Checksum(b, crcTable))
	_, err := w.Write(b)
	return err
}

// readGreeting reads a hello or a reply: the fixed 48 bytes, the epochs
// and the CRC, checking magic, version, sizes and the CRC.
func readGreeting(r io.Reader, magic uint32) (head []byte, epochs []Epoch, err error) {
	head = make([]byte, 48)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, nil, err
	}
	if got := wle.Uint32(head[0:]); got != magic {
		return nil, nil, fmt.Errorf("mqlite: replication: bad magic %#x, want %#x: %w", got, magic, errs.ErrInvalidArgument)
	}
	if v := wle.Uint32(head[4:]); v != wireVersion {
		return nil, nil, fmt.Errorf("mqlite: replication: wire version %d, this side speaks %d: %w", v, wireVersion, errs.ErrInvalidArgument)
	}
	n := int(wle.Uint32(head[44:]))
	if n > maxWireEpoch {
		return nil, nil, errs.Corrupt("replication stream", 44, "%d epochs", n)
	}
	rest := make([]byte, 16*n+4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, nil, err
	}
	c := crc32.Update(crc32.Checksum(head, crcTable), crcTable, rest[:16*n])
	if wle.Uint32(rest[16*n:]) != c {
		return nil, nil, errs.Corrupt("replication stream", 0, "greeting checksum mismatch")
	}
	for i := range n {
		e := rest[16*i:]
		epochs = append(epochs, Epoch{Number: int64(wle.Uint64(e)), Start: int64(wle.Uint64(e[8:]))})
	}
	return head, epochs, nil
}

func readHello(r io.Reader) (hello, error) {
	head, eps, err := readGreeting(r, helloMagic)
	if err != nil {
		return hello{}, err
	}
	h := hello{syncAck: wle.Uint32(head[8:])&flagSyncAck != 0, segment: int64(wle.Uint64(head[28:])),
		end: int64(wle.Uint64(head[36:])), epochs: eps}
	copy(h.id[:], head[12:28])
	return h, nil
}

func readReply(r io.Reader) (reply, error) {
	head, eps, err := readGreeting(r, replyMagic)
	if err != nil {
		return reply{}, err
	}
	rp := reply{status: replyStatus(wle.Uint32(head[8:])), segment: int64(wle.Uint64(head[28:])),
		start: int64(wle.Uint64(head[36:])), epochs: eps}
	copy(rp.id[:], head[12:28])
	return rp, nil
}

// frame is a decoded frame header.
type frame struct {
	kind       uint32
	offset     int64
	length     int
	primaryEnd int64
	crc        uint32
	// seed is the CRC32-C of the header's first 24 bytes. unchecked: a
	// CommitLog chunk whose CRC the caller checks as it appends it
	// (commitlog.Log.AppendRawSum); until then the header is not to be
	// trusted either.
	seed      uint32
	unchecked bool
}

func putFrameHeader(h []byte, f frame, body []byte) {
	wle.PutUint32(h[0:], f.kind)
	wle.PutUint64(h[4:], uint64(f.offset))
	wle.PutUint32(h[12:], uint32(len(body)))
	wle.PutUint64(h[16:], uint64(f.primaryEnd))
	c := crc32.Checksum(h[:24], crcTable)
	if f.kind == frameChunk {
		c = commitlog.UncoveredCRC(c, body)
	} else {
		c = crc32.Update(c, crcTable, body)
	}
	wle.PutUint32(h[24:], c)
}

func writeFrame(w *bufio.Writer, kind uint32, offset, primaryEnd int64, body []byte) error {
	var h [frameHeader]byte
	putFrameHeader(h[:], frame{kind: kind, offset: offset, primaryEnd: primaryEnd}, body)
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// readFrame reads one frame into buf (grown as needed), refusing a chunk
// longer than limit and a metadata frame longer than maxMetaBody, and
// checks its CRC, but for a CommitLog chunk with a body: that one comes
// back unchecked, for the caller to check as it appends it.
func readFrame(r io.Reader, buf []byte, limit int) (frame, []byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, buf, err
	}
	f := frame{kind: wle.Uint32(h[0:]), offset: int64(wle.Uint64(h[4:])), length: int(wle.Uint32(h[12:])),
		primaryEnd: int64(wle.Uint64(h[16:])), crc: wle.Uint32(h[24:])}
	if f.kind != frameChunk && f.kind != frameMeta {
		return f, buf, errs.Corrupt("replication stream", f.offset, "unknown frame kind %d", f.kind)
	}
	if f.kind == frameMeta {
		limit = maxMetaBody
	}
	if f.length < 0 || f.length > limit || f.offset < 0 {
		return f, buf, errs.Corrupt("replication stream", f.offset, "frame of %d bytes, the limit is %d", f.length, limit)
	}
	if cap(buf) < f.length {
		buf = make([]byte, f.length)
	}
	buf = buf[:f.length]
	if _, err := io.ReadFull(r, buf); err != nil {
		return f, buf, err
	}
	f.seed = crc32.Checksum(h[:24], crcTable)
	if f.kind == frameChunk && len(buf) > 0 {
		f.unchecked = true
		return f, buf, nil
	}
	if c := crc32.Update(f.seed, crcTable, buf); c != f.crc {
		return f, buf, errs.Corrupt("replication stream", f.offset, "chunk checksum mismatch")
	}
	return f, buf, nil
}

func writeAck(w io.Writer, written, flushed int64) error {
	var b [ackSize]byte
	wle.PutUint64(b[0:], uint64(written))
	wle.PutUint64(b[8:], uint64(flushed))
	wle.PutUint32(b[16:], crc32.Checksum(b[:16], crcTable))
	_, err := w.Write(b[:])
	return err
}

func readAck(r io.Reader) (written, flushed int64, err error) {
	var b [ackSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, 0, err
	}
	if wle.Uint32(b[16:]) != crc32.Checksum(b[:16], crcTable) {
		return 0, 0, errs.Corrupt("replication stream", 0, "ack checksum mismatch")
	}
	return int64(wle.Uint64(b[0:])), int64(wle.Uint64(b[8:])), nil
}
