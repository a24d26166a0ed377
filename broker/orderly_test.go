//go:build !race

// The orderly push consumer of rocketmq-client-go v2 has a data race of its
// own (processQueue's tree map is read by the consuming goroutine while the
// pulling goroutine writes it, consumer/process_queue.go), which the race
// detector reports whatever the broker does; this test runs without -race.

package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func TestOrderedSendAndOrderlyConsume(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	p := newProducer(t, f, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	const n = 20
	for i := range n {
		for _, key := range []string{"A", "B", "C"} {
			m := primitive.NewMessage(topic, fmt.Appendf(nil, "%s-%02d", key, i))
			m.WithShardingKey(key)
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	seq := map[string][]string{}
	queueOf := map[string]int{}
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			key := string(m.Body[:1])
			seq[key] = append(seq[key], string(m.Body))
			if q, ok := queueOf[key]; ok && q != m.Queue.QueueId {
				t.Errorf("key %s on queues %d and %d", key, q, m.Queue.QueueId)
			}
			queueOf[key] = m.Queue.QueueId
		}
		return consumer.ConsumeSuccess, nil
	}
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, h, consumer.WithConsumerOrder(true))
	eventually(t, 30*time.Second, "ordered messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seq["A"]) >= n && len(seq["B"]) >= n && len(seq["C"]) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	for key, got := range seq {
		for i, body := range got[:n] {
			if want := fmt.Sprintf("%s-%02d", key, i); body != want {
				t.Fatalf("key %s position %d: %s, want %s (%v)", key, i, body, want, got)
			}
		}
	}
}

