package broker

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/mqlite/mqlite"
)

func newProducer(t testing.TB, f *fixture, opts ...producer.Option) rocketmq.Producer {
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
	t.Cleanup(func() { stopClient(p.Shutdown) })
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

func newPushConsumer(t testing.TB, f *fixture, group, topic string, sel consumer.MessageSelector,
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
	t.Cleanup(func() { stopClient(c.Shutdown) })
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

func TestSendAsyncOneWayAndBatch(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	p := newProducer(t, f)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var asyncErrs []error
	for i := range 5 {
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("status %v", r.Status)
			}
			if err != nil {
				mu.Lock()
				asyncErrs = append(asyncErrs, err)
				mu.Unlock()
			}
		}, primitive.NewMessage(topic, fmt.Appendf(nil, "async%d", i)))
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(asyncErrs) > 0 {
		t.Fatalf("async sends: %v", asyncErrs)
	}
	for i := range 3 {
		if err := p.SendOneWay(ctx, primitive.NewMessage(topic, fmt.Appendf(nil, "oneway%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var batch []*primitive.Message
	for i := range 4 {
		batch = append(batch, primitive.NewMessage(topic, fmt.Appendf(nil, "batch%d", i)))
	}
	res, err := p.SendSync(ctx, batch...)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch: %v %+v", err, res)
	}
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	eventually(t, 20*time.Second, "12 messages", func() bool { return got.count() >= 12 })
	b := got.bodies()
	for _, want := range []string{"async0", "async4", "oneway0", "oneway2", "batch0", "batch3"} {
		if b[want] != 1 {
			t.Fatalf("%s delivered %d times: %v", want, b[want], b)
		}
	}
	if len(b) != 12 {
		t.Fatalf("got %d distinct messages: %v", len(b), b)
	}
}

func TestDelayLevelSend(t *testing.T) {
	levels := []time.Duration{100 * time.Millisecond, 1500 * time.Millisecond}
	f := startBroker(t, &mqlite.Options{DelayLevels: levels}, &Options{DelayLevels: levels})
	topic := uniq("T")
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	p := newProducer(t, f)
	m := primitive.NewMessage(topic, []byte("later"))
	m.WithDelayTimeLevel(2)
	sent := time.Now()
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the delayed message", func() bool { return got.count() >= 1 })
	if el := time.Since(sent); el < levels[1]-100*time.Millisecond {
		t.Fatalf("delivered after %s, level 2 is %s", el, levels[1])
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	if string(got.msgs[0].Body) != "later" || got.msgs[0].Topic != topic {
		t.Fatalf("delivered %s on %s", got.msgs[0].Body, got.msgs[0].Topic)
	}
}

func TestCompressedBodyAndKeys(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	p := newProducer(t, f) // the client compresses bodies over 4 KiB
	big := bytes.Repeat([]byte("mqlite "), 3000)
	m := primitive.NewMessage(topic, big)
	m.WithKeys([]string{"k1", "k2"})
	m.WithTag("big")
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	eventually(t, 20*time.Second, "the big message", func() bool { return got.count() >= 1 })
	got.mu.Lock()
	defer got.mu.Unlock()
	g := got.msgs[0]
	if !bytes.Equal(g.Body, big) || g.GetTags() != "big" || g.GetKeys() != "k1 k2" {
		t.Fatalf("body %d bytes (want %d), tags %q, keys %q", len(g.Body), len(big), g.GetTags(), g.GetKeys())
	}
	// The store holds it uncompressed, indexed by both keys.
	for _, k := range []string{"k1", "k2"} {
		ms, err := f.store.MessagesByKey(topic, k, time.Time{}, time.Now().Add(time.Minute), 10)
		if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Body, big) {
			t.Fatalf("key %s: %d messages, %v", k, len(ms), err)
		}
	}
}

func TestRequestReply(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("Req")
	replier := newProducer(t, f)
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err != nil {
				return consumer.ConsumeRetryLater, err
			}
			// CreateReplyMessage parses its body argument as properties and
			// drops it (rocketmq-client-go consumer/message_util.go).
			reply.Body = append([]byte("re: "), m.Body...)
			if _, err := replier.SendSync(context.Background(), reply); err != nil {
				return consumer.ConsumeRetryLater, err
			}
		}
		return consumer.ConsumeSuccess, nil
	}
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, h)
	requester := newProducer(t, f)
	got, err := requester.Request(context.Background(), 10*time.Second, primitive.NewMessage(topic, []byte("ping")))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != "re: ping" {
		t.Fatalf("reply %q", got.Body)
	}
}
