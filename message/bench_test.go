package message

import (
	"bytes"
	"testing"
)

// BenchmarkBatchDecodeAt decodes a stored 128-byte message (topic, unique
// key, no user properties) into a Batch: what a consumer's read-ahead
// spends on each message it hands over.
func BenchmarkBatchDecodeAt(b *testing.B) {
	p := benchPayload()
	var batch Batch
	b.ReportAllocs()
	for i := range b.N {
		if _, err := batch.DecodeAt(p, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPoolDecodeAt is BenchmarkBatchDecodeAt with every message
// released at once into a Pool: the decoding alone, without the
// collector's share of the allocation.
func BenchmarkPoolDecodeAt(b *testing.B) {
	p := benchPayload()
	var pool Pool
	batch := pool.Get()
	b.ReportAllocs()
	for i := range b.N {
		ext, err := batch.DecodeAt(p, int64(i))
		if err != nil {
			b.Fatal(err)
		}
		Release(ext)
	}
	pool.Put(batch)
}

// benchPayload is the stored payload of a 128-byte message with a topic
// and a unique key and no user properties.
func benchPayload() []byte {
	m := &Message{Topic: "bench", Body: bytes.Repeat([]byte{'x'}, 128)}
	uniq := []byte("0123456789ABCDEF0123456789ABCDEF")
	p := make([]byte, PayloadSize(m, len(uniq)))
	Encode(p, m, &Meta{QueueOffset: 7, StoreMs: 1, BornMs: 1, Uniq: uniq})
	return p
}
