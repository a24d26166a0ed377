package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/mqlite/mqlite"
)

func sendN(t *testing.T, p rocketmq.Producer, topic, prefix string, n int, decorate func(*primitive.Message, int)) {
	t.Helper()
	for i := range n {
		m := primitive.NewMessage(topic, fmt.Appendf(nil, "%s%d", prefix, i))
		if decorate != nil {
			decorate(m, i)
		}
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %s%d: %v", prefix, i, err)
		}
	}
}

func TestClusteringTwoInstancesAndRebalance(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic, group := uniq("T"), uniq("g")
	var a, b collect
	ca := newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, a.handle)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, b.handle)
	eventually(t, 10*time.Second, "two members", func() bool { return len(f.b.clients.members(group)) == 2 })
	p := newProducer(t, f)
	sendN(t, p, topic, "first", 40, nil)
	eventually(t, 20*time.Second, "40 messages", func() bool { return a.count()+b.count() >= 40 })
	if a.count() == 0 || b.count() == 0 {
		t.Fatalf("one member got everything: %d and %d", a.count(), b.count())
	}
	seen := map[string]int{}
	for k, v := range a.bodies() {
		seen[k] += v
	}
	for k, v := range b.bodies() {
		seen[k] += v
	}
	for i := range 40 {
		if n := seen[fmt.Sprintf("first%d", i)]; n != 1 {
			t.Fatalf("first%d delivered %d times across the group", i, n)
		}
	}
	// One member stops: the other takes over every queue.
	ca.Shutdown()
	eventually(t, 10*time.Second, "one member", func() bool { return len(f.b.clients.members(group)) == 1 })
	before := b.count()
	sendN(t, p, topic, "second", 20, nil)
	eventually(t, 30*time.Second, "the second batch on the remaining member", func() bool {
		got := b.bodies()
		for i := range 20 {
			if got[fmt.Sprintf("second%d", i)] == 0 {
				return false
			}
		}
		return true
	})
	if b.count() < before+20 {
		t.Fatalf("remaining member got %d new messages", b.count()-before)
	}
}

func TestBroadcasting(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic, group := uniq("T"), uniq("g")
	var a, b collect
	opt := consumer.WithConsumerModel(consumer.BroadCasting)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, a.handle, opt)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, b.handle, opt)
	eventually(t, 10*time.Second, "two members", func() bool { return len(f.b.clients.members(group)) == 2 })
	p := newProducer(t, f)
	sendN(t, p, topic, "m", 10, nil)
	eventually(t, 20*time.Second, "10 messages on each member", func() bool { return a.count() >= 10 && b.count() >= 10 })
	for _, c := range []*collect{&a, &b} {
		got := c.bodies()
		for i := range 10 {
			if got[fmt.Sprintf("m%d", i)] != 1 {
				t.Fatalf("member missed or repeated m%d: %v", i, got)
			}
		}
	}
}

func TestTagAndSQLSelectors(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	var tags, sql, all collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "A || C"}, tags.handle)
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "n > 5 AND TAGS = 'B'"}, sql.handle)
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, all.handle)
	p := newProducer(t, f)
	sendN(t, p, topic, "m", 12, func(m *primitive.Message, i int) {
		m.WithTag([]string{"A", "B", "C"}[i%3])
		m.WithProperty("n", fmt.Sprint(i))
	})
	eventually(t, 20*time.Second, "all 12 on the unfiltered group", func() bool { return all.count() >= 12 })
	eventually(t, 20*time.Second, "the tag group's 8", func() bool { return tags.count() >= 8 })
	eventually(t, 20*time.Second, "the SQL group's 2", func() bool { return sql.count() >= 2 })
	for body := range tags.bodies() {
		var i int
		fmt.Sscanf(body, "m%d", &i)
		if i%3 == 1 {
			t.Fatalf("tag group got %s (tag B)", body)
		}
	}
	got := sql.bodies()
	if len(got) != 2 || got["m7"] != 1 || got["m10"] != 1 {
		t.Fatalf("SQL group got %v, want m7 and m10", got)
	}
}

func TestRetryLaterThenDLQ(t *testing.T) {
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 100 * time.Millisecond
	}
	f := startBroker(t, &mqlite.Options{DelayLevels: levels}, &Options{DelayLevels: levels})
	topic, group := uniq("T"), uniq("g")
	var mu sync.Mutex
	var deliveries []*primitive.MessageExt
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		deliveries = append(deliveries, msgs...)
		mu.Unlock()
		return consumer.ConsumeRetryLater, nil
	}
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, h, consumer.WithMaxReconsumeTimes(2))
	p := newProducer(t, f)
	sendN(t, p, topic, "fail", 1, nil)
	// Delivered once, then twice from %RETRY%group, then to %DLQ%group.
	eventually(t, 30*time.Second, "the message in the DLQ", func() bool {
		dead, err := f.store.DeadLetters(group, 0, 10)
		return err == nil && len(dead) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 3 {
		t.Fatalf("%d deliveries, want 3 (1 + 2 retries)", len(deliveries))
	}
	for i, m := range deliveries {
		if string(m.Body) != "fail0" || m.ReconsumeTimes != int32(i) || m.Topic != topic {
			t.Fatalf("delivery %d: %s reconsume %d topic %s", i, m.Body, m.ReconsumeTimes, m.Topic)
		}
	}
	if max, err := f.store.MaxOffset("%RETRY%"+group, 0); err != nil || max != 2 {
		t.Fatalf("retry queue holds %d (%v), want 2", max, err)
	}
}
