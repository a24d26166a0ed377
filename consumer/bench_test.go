package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mqlite/mqlite/message"
)

// benchEnv fills a topic of 4 queues with n messages.
func benchEnv(b *testing.B, n int) *env {
	e := newEnv(b, nil)
	e.st.createTopic("t", 4)
	body := make([]byte, 128)
	for i := range n {
		e.st.putMsg(&message.Message{Topic: "t", Body: body}, i%4)
	}
	return e
}

func benchPush(b *testing.B, o Options) {
	e := benchEnv(b, b.N)
	var n atomic.Int64
	done := make(chan struct{})
	h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
		if n.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	}
	o.ConsumeFromWhere = ConsumeFromFirstOffset
	b.ReportAllocs()
	b.ResetTimer()
	c := e.push("g", o, "t", h)
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPushConcurrent: a no-op handler over the store's backlog; one
// op is one message (allocations include the fake store's copy of each
// message, as a real store decodes one).
func BenchmarkPushConcurrent(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchPush(b, Options{ConsumeBatchSize: batch})
		})
	}
}

// BenchmarkPushOrderly: the same with the orderly listener.
func BenchmarkPushOrderly(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchPush(b, Options{Orderly: true, ConsumeBatchSize: batch})
		})
	}
}

// BenchmarkPullPoll: Poll batches of 32 over the backlog; one op is one
// message.
func BenchmarkPullPoll(b *testing.B) {
	e := benchEnv(b, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	c := e.pull("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true}, "t")
	ctx := context.Background()
	for got := 0; got < b.N; {
		msgs, err := c.Poll(ctx, 32)
		if err != nil {
			b.Fatal(err)
		}
		got += len(msgs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}
