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
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func newProducer(t *testing.T, f *fixture, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	base := []producer.Option{producer.WithNameServer(f.ns()), producer.WithGroupName(uniq("pg")),
		producer.WithInstanceName(uniq("pi")), producer.WithRetry(0)}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// collect is a push consumer handler recording bodies.
type collect struct {
	mu   sync.Mutex
	msgs []*primitive.MessageExt
}

func (c *collect) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	c.mu.Lock()
	c.msgs = append(c.msgs, msgs...)
	c.mu.Unlock()
	return consumer.ConsumeSuccess, nil
}

func (c *collect) bodies() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, m := range c.msgs {
		out[string(m.Body)]++
	}
	return out
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func newPushConsumer(t *testing.T, f *fixture, group, topic string, sel consumer.MessageSelector,
	h func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	base := []consumer.Option{consumer.WithNameServer(f.ns()), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("ci")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}
	c, err := rocketmq.NewPushConsumer(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, sel, h); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

func TestSendSyncAndPushConsume(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	p := newProducer(t, f)
	for i := range 10 {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, fmt.Appendf(nil, "m%d", i)))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK || res.OffsetMsgID == "" {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	eventually(t, 20*time.Second, "10 messages", func() bool { return got.count() >= 10 })
	b := got.bodies()
	for i := range 10 {
		if b[fmt.Sprintf("m%d", i)] != 1 {
			t.Fatalf("m%d delivered %d times: %v", i, b[fmt.Sprintf("m%d", i)], b)
		}
	}
}
