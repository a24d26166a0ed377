package mqlite

import (
	"context"
	"testing"
)

// BenchmarkProducerSend: one goroutine sending 128-byte messages through a
// Producer (round robin over four queues), FlushAsync: the producer's
// send path on top of Put's.
func BenchmarkProducerSend(b *testing.B) {
	s, err := Open(b.TempDir(), &Options{Flush: FlushAsync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("t", TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	p, err := s.NewProducer(ProducerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := &Message{Topic: "t", Body: make([]byte, 128)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := p.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}
