package producer_test

// Producer benchmarks on real files, against raw Store.Put in the same run:
//
//	go test -run '^$' -bench . -benchtime 2s ./producer/

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mqlite/mqlite"
)

func benchStore(b *testing.B, mode mqlite.FlushMode) *mqlite.Store {
	s, err := mqlite.Open(filepath.Join(b.TempDir(), "store"), &mqlite.Options{Flush: mode, SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTopic("bench", mqlite.TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// split runs b.N calls of send over g goroutines, each with its own message.
func split(b *testing.B, g, size int, send func(m *mqlite.Message, i int) error) {
	body := make([]byte, size)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		m := &mqlite.Message{Topic: "bench", Body: body}
		wg.Go(func() {
			for range n {
				if err := send(m, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSend compares Producer.Send with raw Store.Put (FlushAsync,
// 128 B, 1 and 16 goroutines): the producer's overhead is the ratio.
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("put/g%d", g), func(b *testing.B) {
			s := benchStore(b, mqlite.FlushAsync)
			split(b, g, 128, func(m *mqlite.Message, i int) error {
				_, err := s.Put(ctx, m, i%4)
				return err
			})
		})
		b.Run(fmt.Sprintf("send/g%d", g), func(b *testing.B) {
			s := benchStore(b, mqlite.FlushAsync)
			p, _ := s.NewProducer(mqlite.ProducerOptions{})
			split(b, g, 128, func(m *mqlite.Message, _ int) error {
				_, err := p.Send(ctx, m)
				return err
			})
		})
	}
}

// BenchmarkSync compares single Sends with SendBatch of 64 under FlushSync
// (128 B, one goroutine): msgs/s is per message in both.
func BenchmarkSync(b *testing.B) {
	ctx := context.Background()
	b.Run("send", func(b *testing.B) {
		s := benchStore(b, mqlite.FlushSync)
		p, _ := s.NewProducer(mqlite.ProducerOptions{})
		split(b, 1, 128, func(m *mqlite.Message, _ int) error {
			_, err := p.Send(ctx, m)
			return err
		})
	})
	b.Run("batch64", func(b *testing.B) {
		s := benchStore(b, mqlite.FlushSync)
		p, _ := s.NewProducer(mqlite.ProducerOptions{})
		batch := make([]*mqlite.Message, 64)
		for i := range batch {
			batch[i] = &mqlite.Message{Topic: "bench", Body: make([]byte, 128)}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += len(batch) {
			if _, err := p.SendBatch(ctx, batch[:min(len(batch), b.N-i)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("async", func(b *testing.B) {
		s := benchStore(b, mqlite.FlushSync)
		p, _ := s.NewProducer(mqlite.ProducerOptions{})
		var wg sync.WaitGroup
		wg.Add(b.N)
		split(b, 1, 128, func(m *mqlite.Message, _ int) error {
			return p.SendAsync(ctx, m, func(_ mqlite.SendResult, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		})
		wg.Wait()
	})
}
