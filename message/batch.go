package message

import "unsafe"

// Batch decodes payloads into MessageExts carved from shared blocks: an
// array of MessageExt and a byte block holding the copied bodies, topics,
// properties and message IDs, 14 KiB each. Decoding thus costs two
// allocations per block (about 50 messages of 128 bytes) instead of two
// per message, plus what a message's keys and user properties need. The
// messages are independent values like Decode's: each may be kept, changed
// or appended to without affecting the others, and each Body's capacity
// ends at its length. Keeping a message keeps its two blocks alive.
//
// A Batch hands out each byte of its blocks once, so what is left of them
// may serve later decodes, by any goroutine (one at a time). The zero
// Batch is ready to use. A Batch from a Pool's Get decodes into the
// Pool's recycled blocks instead (see Pool).
type Batch struct {
	exts []MessageExt // carved from the front
	buf  []byte       // carved from the front
	pool *Pool        // nil: fresh blocks, left to the garbage collector
	cur  *block       // the pool block exts and buf belong to; holds one ref
}

// blockBytes is the size of the blocks a Batch allocates when it runs out:
// one of the Go allocator's size classes, so that nothing is lost to
// rounding, and one whose spans hold several objects (14336 B: 4 per 56
// KiB span), so that most blocks come without a trip to the central lists.
const blockBytes = 14336

// extsPerBlock is how many MessageExts fill a block.
var extsPerBlock = blockBytes / int(unsafe.Sizeof(MessageExt{}))

// DecodeAt is the package's DecodeAt into the batch: it checks the payload
// of the record stored at CommitLog offset off and returns its copy. A
// payload that fails the check takes nothing from the batch.
func (b *Batch) DecodeAt(p []byte, off int64) (*MessageExt, error) {
	if len(p) < FixedSize { // decodedSize needs the fixed part; decodeInto checks the rest
		return nil, ErrTruncated
	}
	if b.pool != nil {
		return b.decodePooled(p, off)
	}
	if len(b.exts) == 0 {
		b.exts = make([]MessageExt, extsPerBlock)
	}
	ext := &b.exts[0]
	need := decodedSize(len(p), off)
	if need > len(b.buf) {
		b.buf = make([]byte, max(need, blockBytes))
	}
	tail := b.buf[:need:need]
	if err := decodeInto(p, off, ext, tail); err != nil {
		*ext = MessageExt{}
		return nil, err
	}
	b.exts, b.buf = b.exts[1:], b.buf[need:]
	return ext, nil
}

// decodePooled is DecodeAt into the pool's blocks: a message takes a
// reference on its block. One whose copy is larger than a block gets its
// own byte block (collected, not recycled) and still an ext of the block.
func (b *Batch) decodePooled(p []byte, off int64) (*MessageExt, error) {
	need := decodedSize(len(p), off)
	if b.cur == nil || len(b.exts) == 0 || (need > len(b.buf) && need <= blockBytes) {
		if b.cur != nil {
			b.cur.unref()
		}
		b.cur = b.pool.newBlock()
		b.exts, b.buf = b.cur.exts, b.cur.buf
	}
	ext := &b.exts[0]
	own := need > len(b.buf)
	var tail []byte
	if own {
		tail = make([]byte, need)
	} else {
		tail = b.buf[:need:need]
	}
	if err := decodeInto(p, off, ext, tail); err != nil {
		*ext = MessageExt{}
		return nil, err
	}
	if !own {
		b.buf = b.buf[need:]
	}
	b.exts = b.exts[1:]
	b.cur.refs.Add(1)
	ext.blk = b.cur
	return ext, nil
}
