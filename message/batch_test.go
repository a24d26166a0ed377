package message

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mqlite/mqlite/internal/errs"
)

// TestBatchDecodesLikeDecodeAt decodes the seed payloads through one Batch
// (also with a block too small for some of them, so it allocates more) and
// compares each with DecodeAt; the copies do not alias each other or the
// input.
func TestBatchDecodesLikeDecodeAt(t *testing.T) {
	var payloads [][]byte
	for i, m := range seedMessages() {
		p := encodeForTest(m, &Meta{QueueID: int32(i), QueueOffset: int64(i), StoreMs: 1_700_000_000_001, BornMs: 1_600_000_000_002,
			Uniq: []byte("0123456789ABCDEF0123456789ABCDEF")})
		payloads = append(payloads, p)
	}
	for _, size := range []int{blockBytes, 100, 0} {
		var b Batch
		if size > 0 { // what is left of earlier blocks: too small for some
			b.buf = make([]byte, size)
		}
		var got []*MessageExt
		for i, p := range payloads {
			in := bytes.Clone(p)
			ext, err := b.DecodeAt(p, int64(1000*i))
			if err != nil {
				t.Fatalf("size %d, payload %d: %v", size, i, err)
			}
			if !bytes.Equal(in, p) {
				t.Fatal("decoding changed its input")
			}
			var want MessageExt
			if err := DecodeAt(p, int64(1000*i), &want); err != nil {
				t.Fatal(err)
			}
			if !sameMessage(&want, ext) || want.MsgID != ext.MsgID || ext.MsgID != ID(int64(1000*i)) {
				t.Fatalf("size %d, payload %d: batch decode differs:\n%+v\n%+v", size, i, want, *ext)
			}
			if cap(ext.Body) != len(ext.Body) {
				t.Fatalf("Body capacity %d past its length %d", cap(ext.Body), len(ext.Body))
			}
			got = append(got, ext)
		}
		// Changing one message's body, in place or by appending, leaves
		// the others and the stored payload alone.
		for _, ext := range got {
			for j := range ext.Body {
				ext.Body[j] = 0xEE
			}
			ext.Body = append(ext.Body, 1, 2, 3)
		}
		for i, ext := range got {
			var want MessageExt
			if err := DecodeAt(payloads[i], int64(1000*i), &want); err != nil {
				t.Fatal(err)
			}
			if want.Topic != ext.Topic || want.UniqKey != ext.UniqKey || want.Tags != ext.Tags || want.MsgID != ext.MsgID {
				t.Fatalf("size %d, message %d: strings changed by writes to bodies", size, i)
			}
		}
	}
}

// TestBatchRejectsDamage: a damaged payload is ErrCorrupt and uses no slot.
func TestBatchRejectsDamage(t *testing.T) {
	good := encodeForTest(seedMessages()[1], &Meta{QueueOffset: 9})
	var b Batch
	for _, bad := range [][]byte{good[:FixedSize-1], good[:len(good)-1], append(bytes.Clone(good), 0)} {
		if _, err := b.DecodeAt(bad, 0); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("damaged payload of %d bytes: %v, want ErrCorrupt", len(bad), err)
		}
	}
	props := bytes.Clone(good)
	v := View(props)
	pp := v.Props()
	pp[0] = propValueSep // a value separator before any name separator
	if _, err := b.DecodeAt(props, 0); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("malformed properties: %v, want ErrCorrupt", err)
	}
	// A name with no value separator after it, and lengths that point
	// past the record, through a Pool's Batch too.
	noValue := encodeForTest(&Message{Topic: "t", Properties: map[string]string{"a": "1"}}, &Meta{})
	noValue[len(noValue)-1] = 'x' // the value separator after "1"
	long := bytes.Clone(good)
	byteOrder.PutUint32(long[posBodyLen:], uint32(len(good))) // the body runs past the end
	var pool Pool
	pb := pool.Get()
	for _, bad := range [][]byte{noValue, long} {
		if _, err := b.DecodeAt(bad, 0); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("damaged payload %x: %v, want ErrCorrupt", bad, err)
		}
		if _, err := pb.DecodeAt(bad, 0); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("damaged payload %x through a pool: %v, want ErrCorrupt", bad, err)
		}
	}
	pool.Put(pb)
	if len(b.exts) != 0 && len(b.exts) != extsPerBlock {
		t.Fatalf("failed decodes used slots: %d left of %d", len(b.exts), extsPerBlock)
	}
	left := len(b.buf)
	ext, err := b.DecodeAt(good, 0)
	if err != nil || ext.Tags != "created" || ext.Properties["a"] != "1" {
		t.Fatalf("decode after failures: %v %+v", err, ext)
	}
	if len(b.exts) != extsPerBlock-1 || (left > 0 && len(b.buf) != left-decodedSize(len(good), 0)) {
		t.Fatalf("after one decode: %d slots and %d bytes left", len(b.exts), len(b.buf))
	}
}
