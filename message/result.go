package message

import "time"

// UniqLen is the length of a unique key the store generates: 32 upper-case
// hex digits (a per-store prefix, the born time and a sequence number).
const UniqLen = 32

// PutResult describes a stored message: where it went and its keys. It
// holds no heap references of its own, so returning it does not allocate.
type PutResult struct {
	Offset      int64 // CommitLog offset
	Size        int   // record size
	QueueID     int
	QueueOffset int64
	StoreTime   time.Time
	// Delayed is set for a message stored to wait for its delivery time
	// (a DelayLevel, or a DeliverAt in the future): QueueID is the queue
	// of its topic it will be delivered to, QueueOffset is -1 (the queue
	// offset is assigned at delivery), and Offset, Size and MsgID name the
	// waiting copy; MessageByID of that ID returns the delivered message
	// once it is delivered (with its own ID and queue offset), and until
	// then the waiting message in its real topic and queue, QueueOffset -1.
	Delayed bool
	// Duplicate is set when the message carried a DedupID already stored
	// in its topic within the dedup window: nothing was stored, and the
	// other fields describe the message stored first.
	Duplicate bool
	uniq      [UniqLen]byte
	ownUniq   string
}

// NewPutResult is for stores: own is the unique key the message carried,
// gen the one generated for it when own is empty.
func NewPutResult(off int64, size, queue int, qoff int64, storeTime time.Time, own string, gen *[UniqLen]byte) PutResult {
	r := PutResult{Offset: off, Size: size, QueueID: queue, QueueOffset: qoff, StoreTime: storeTime, ownUniq: own}
	if own == "" && gen != nil {
		r.uniq = *gen
	}
	return r
}

// SetPutResult is NewPutResult into *dst, field by field: a store filling
// a batch's results in place copies no whole struct (which, while the
// garbage collector marks, costs a bulk write barrier per result).
func SetPutResult(dst *PutResult, off int64, size, queue int, qoff int64, storeTime time.Time, own string, gen *[UniqLen]byte) {
	dst.Offset, dst.Size, dst.QueueID, dst.QueueOffset = off, size, queue, qoff
	dst.StoreTime, dst.ownUniq = storeTime, own
	if own == "" && gen != nil {
		dst.uniq = *gen
	}
}

// MsgID returns the message ID (it encodes the CommitLog offset): the
// value of MessageExt.MsgID for this message.
func (r *PutResult) MsgID() string { return ID(r.Offset) }

// ID is MsgID, under the name MessageExt has too: r.ID() and m.ID() read
// the message ID of a send result and of a read message alike.
func (r *PutResult) ID() string { return r.MsgID() }

// UniqKey returns the message's unique key (the producer's if it set one).
func (r *PutResult) UniqKey() string {
	if r.ownUniq != "" {
		return r.ownUniq
	}
	return string(r.uniq[:])
}

// End is the CommitLog offset just past the record.
func (r *PutResult) End() int64 { return r.Offset + int64(r.Size) }
