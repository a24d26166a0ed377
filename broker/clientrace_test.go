//go:build !race

// Tests of client features that have data races of their own in
// rocketmq-client-go v2, which the race detector reports whatever the
// broker does: the orderly push consumer (processQueue's tree map is read by
// the consuming goroutine while the pulling goroutine writes it,
// consumer/process_queue.go) and the pull consumer's PullFrom (it rewrites
// subscription data a rebalance goroutine reads). They run without -race.

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
	"github.com/mqlite/mqlite"
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

func TestPullFrom(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	if err := f.store.CreateTopic(topic, mqlite.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	sendN(t, newProducer(t, f), topic, "m", 10, nil)
	c := newLitePull(t, f, uniq("g"))
	mq := &primitive.MessageQueue{Topic: topic, BrokerName: DefaultBrokerName, QueueId: 0}
	if err := c.Assign(topic, []*primitive.MessageQueue{mq}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := c.PullFrom(context.Background(), mq, 3, 4)
	if err != nil || res.Status != primitive.PullFound {
		t.Fatalf("pull from 3: %v %+v", err, res)
	}
	msgs := res.GetMessageExts()
	if len(msgs) != 4 || string(msgs[0].Body) != "m3" || string(msgs[3].Body) != "m6" || res.NextBeginOffset != 7 {
		t.Fatalf("pull from 3: %d messages, next %d", len(msgs), res.NextBeginOffset)
	}
	if msgs[0].OffsetMsgId == "" || msgs[0].QueueOffset != 3 {
		t.Fatalf("message 3: id %q offset %d", msgs[0].OffsetMsgId, msgs[0].QueueOffset)
	}
}
