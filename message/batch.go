package message

// Batch decodes the payloads of one read into MessageExts that share two
// allocations: an array of MessageExt and one block holding every copied
// body, topic, property and message ID. Decoding n messages thus costs two
// allocations instead of 2n (plus what a message's keys and user properties
// need). The messages are independent values like Decode's: each may be
// kept, changed or appended to without affecting the others, and each
// Body's capacity ends at its length. Keeping any one of them keeps the
// whole batch's memory alive.
//
// The zero Batch is ready to use; Reset sizes the next allocations.
type Batch struct {
	exts []MessageExt // carved from the front
	buf  []byte       // carved from the front
}

// Reset starts new blocks for up to n messages whose payloads add up to
// payloadBytes; messages decoded before are not touched. Both are
// estimates: a batch that runs out allocates more.
func (b *Batch) Reset(n, payloadBytes int) {
	b.exts = make([]MessageExt, max(n, 1))
	b.buf = make([]byte, max(payloadBytes-n*posBody, 0)+n*idSize)
}

// DecodeAt is the package's DecodeAt into the batch: it checks the payload
// of the record stored at CommitLog offset off and returns its copy.
func (b *Batch) DecodeAt(p []byte, off int64) (*MessageExt, error) {
	if err := CheckPayload(p); err != nil {
		return nil, err
	}
	if len(b.exts) == 0 {
		b.exts = make([]MessageExt, 8)
	}
	ext := &b.exts[0]
	need := decodedSize(len(p), off)
	if need > len(b.buf) {
		b.buf = make([]byte, max(need, 2*len(b.buf)))
	}
	tail := b.buf[:need:need]
	if err := decodeInto(p, off, ext, tail); err != nil {
		*ext = MessageExt{}
		return nil, err
	}
	b.exts, b.buf = b.exts[1:], b.buf[need:]
	return ext, nil
}
