package mqlite

// Consume benchmarks on real files, at the size issue 5 sets (1,000,000
// backlogged messages):
//
//	go test -run '^$' -bench 'Consume|EndToEnd' -benchtime 1000000x -count 3 -benchmem .
//	go test -run '^$' -bench 'Paced' -benchtime 50000x -count 3 .

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// backlog opens a store on disk with n 128-byte messages in "bench",
// closes it and opens it again, so that the consumers read a backlog at
// rest (no writeback, warming or dispatch of the fill in the background).
func backlog(b testing.TB, n int) *Store {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "store")
	// RocketMQ's file sizes, as the figures in docs/performance.md were
	// taken with (the small defaults cost a backlog reader 5-10% a message:
	// more queue files to map).
	o := &Options{SegmentSize: 256 << 20, ConsumeQueueEntries: 300_000, IndexSlots: 1 << 20, IndexEntries: 4_000_000}
	s, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTopic("bench", TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	batch := make([]*Message, 64)
	for i := range batch {
		batch[i] = &Message{Topic: "bench", Body: make([]byte, 128)}
	}
	for i := 0; i < n; i += len(batch) {
		if _, err := s.PutBatch(context.Background(), batch[:min(len(batch), n-i)], (i/len(batch))%4); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(dir, o); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkConsume drains a backlog of b.N messages with a push consumer
// (no-op handler, batch 1 and 32) and a pull consumer (Poll of 32), each
// with ordinary messages and with ReuseMessages ("/reuse").
func BenchmarkConsume(b *testing.B) {
	for _, reuse := range []bool{false, true} {
		suffix := ""
		if reuse {
			suffix = "/reuse"
		}
		for _, batch := range []int{1, 32} {
			b.Run("push/batch"+itoa(batch)+suffix, func(b *testing.B) {
				benchPushConsume(b, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ConsumeBatchSize: batch, ReuseMessages: reuse})
			})
		}
		b.Run("pull/poll32"+suffix, func(b *testing.B) {
			benchPoll(b, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReuseMessages: reuse})
		})
	}
}

func benchPushConsume(b *testing.B, o ConsumerOptions) {
	s := backlog(b, b.N)
	var n atomic.Int64
	done := make(chan struct{})
	c, err := s.NewPushConsumer("g", o)
	if err != nil {
		b.Fatal(err)
	}
	c.Subscribe("bench", nil)
	b.ReportAllocs()
	kc := startKernelCost()
	b.ResetTimer()
	c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if n.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	})
	<-done
	b.StopTimer()
	kc.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	c.Close()
}

func benchPoll(b *testing.B, o ConsumerOptions) {
	s := backlog(b, b.N)
	pc, err := s.NewPullConsumer("g", o)
	if err != nil {
		b.Fatal(err)
	}
	pc.Subscribe("bench", nil)
	b.ReportAllocs()
	kc := startKernelCost()
	b.ResetTimer()
	for got := 0; got < b.N; {
		msgs, err := pc.Poll(context.Background(), 32)
		if err != nil {
			b.Fatal(err)
		}
		got += len(msgs)
	}
	b.StopTimer()
	kc.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	pc.Close()
}

// BenchmarkEndToEnd measures Send called -> handler starts (so it includes
// Send itself), FlushAsync, one message at a time (the next is sent when
// the last arrived).
func BenchmarkEndToEnd(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.CreateTopic("e2e", TopicConfig{Queues: 1})
	p, _ := s.NewProducer(ProducerOptions{})
	var sent atomic.Int64
	arrived := make(chan time.Duration, 1)
	c, _ := s.NewPushConsumer("g", ConsumerOptions{})
	c.Subscribe("e2e", nil)
	c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		arrived <- time.Duration(time.Now().UnixNano() - sent.Load())
		return ConsumeSuccess
	})
	lat := make([]time.Duration, 0, b.N)
	m := &Message{Topic: "e2e", Body: make([]byte, 128)}
	b.ResetTimer()
	for range b.N {
		sent.Store(time.Now().UnixNano())
		if _, err := p.Send(context.Background(), m); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-arrived)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
	c.Close()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// pacedInterval is the steady load of the paced benchmarks: 10,000
// messages a second, the harness's latency rate.
const pacedInterval = 100 * time.Microsecond

// pacedStore opens a store on disk with the one-queue topic "e2e".
func pacedStore(b *testing.B) *Store { return benchStoreTopic(b, "e2e", 1) }

// pacedSend sends b.N messages to "e2e" one every pacedInterval, whether
// or not the last one arrived, storing into sent[i] when message i's
// send was called; then it waits for done and reports the percentiles of
// lat.
func pacedSend(b *testing.B, send func(*Message) error, sent []atomic.Int64, done <-chan struct{}, lat []time.Duration) {
	m := &Message{Topic: "e2e", Body: make([]byte, 128)}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if d := time.Until(start.Add(time.Duration(i) * pacedInterval)); d > 0 {
			time.Sleep(d)
		}
		sent[i].Store(time.Now().UnixNano())
		if err := send(m); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	reportPercentiles(b, "e2e", lat)
}

// BenchmarkEndToEndPaced is BenchmarkEndToEnd under a steady load (see
// pacedSend): Send called -> the push consumer's handler starts. A first
// message, not measured, waits until the consumer holds the queue and
// fetches.
func BenchmarkEndToEndPaced(b *testing.B) {
	s := pacedStore(b)
	p, err := s.NewProducer(ProducerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sent := make([]atomic.Int64, b.N)
	lat := make([]time.Duration, b.N)
	var arrived atomic.Int64
	ready, done := make(chan struct{}), make(chan struct{})
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Subscribe("e2e", nil)
	c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		now := time.Now().UnixNano()
		for _, m := range msgs {
			if m.QueueOffset == 0 {
				close(ready)
				continue
			}
			lat[m.QueueOffset-1] = time.Duration(now - sent[m.QueueOffset-1].Load())
			if arrived.Add(1) == int64(b.N) {
				close(done)
			}
		}
		return ConsumeSuccess
	})
	send := func(m *Message) error { _, err := p.Send(context.Background(), m); return err }
	if err := send(&Message{Topic: "e2e", Body: []byte("first")}); err != nil {
		b.Fatal(err)
	}
	<-ready
	pacedSend(b, send, sent, done, lat)
}

// BenchmarkReadQueuePaced: the same load, Put called -> a reader blocked
// in ReadQueue has the message (the harness's latency workload).
func BenchmarkReadQueuePaced(b *testing.B) {
	s := pacedStore(b)
	sent := make([]atomic.Int64, b.N)
	lat := make([]time.Duration, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for next := int64(0); next < int64(b.N); {
			ms, err := s.ReadQueue(context.Background(), "e2e", 0, next, 1024)
			if err != nil {
				b.Error(err)
				return
			}
			now := time.Now().UnixNano()
			for _, m := range ms {
				lat[m.QueueOffset] = time.Duration(now - sent[m.QueueOffset].Load())
			}
			next += int64(len(ms))
		}
	}()
	pacedSend(b, func(m *Message) error { _, err := s.Put(context.Background(), m, 0); return err }, sent, done, lat)
}

// BenchmarkProduceConsume: one producer Puts b.N 128-byte messages as
// fast as it can while a push consumer (batches of 32) drains them; msgs/s
// is for the whole run. It guards the dispatch's yields to woken readers,
// which must not take the consumer's work off the other core at full speed.
func BenchmarkProduceConsume(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	done := make(chan struct{})
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ConsumeBatchSize: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Subscribe("bench", nil)
	c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if n.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	})
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Put(context.Background(), m, i%4); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
