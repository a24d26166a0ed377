package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/mqlite/mqlite"
)

func newLitePull(t *testing.T, f *fixture, group string) rocketmq.PullConsumer {
	t.Helper()
	c, err := rocketmq.NewPullConsumer(consumer.WithNameServer(f.ns()), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("pi")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithPullBatchSize(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c.Shutdown) })
	return c
}

func TestLitePullPollSeekCommit(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic, group := uniq("T"), uniq("g")
	if err := f.store.CreateTopic(topic, mqlite.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, f)
	sendN(t, p, topic, "m", 10, nil)

	c := newLitePull(t, f, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []string
	var mq *primitive.MessageQueue
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 10 && time.Now().Before(deadline) {
		cr, err := c.Poll(ctx, time.Second)
		if err != nil {
			continue // ErrNoNewMsg: the client is still rebalancing
		}
		for _, m := range cr.GetMsgList() {
			got = append(got, string(m.Body))
			mq = m.Queue
		}
		c.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	for i, body := range got {
		if want := fmt.Sprintf("m%d", i); body != want {
			t.Fatalf("poll order: %v", got)
		}
	}
	if len(got) != 10 {
		t.Fatalf("polled %d messages: %v", len(got), got)
	}
	if err := c.PersistOffset(ctx, topic); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the committed offset", func() bool {
		off, ok, err := f.store.CommittedOffset(group, topic, 0)
		return err == nil && ok && off == 10
	})

	// An assigning consumer seeks, then polls from there.
	c2 := newLitePull(t, f, uniq("g"))
	if err := c2.Assign(topic, []*primitive.MessageQueue{mq}); err != nil {
		t.Fatal(err)
	}
	c2.SeekOffset(mq, 8)
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	c = c2
	var again []string
	deadline = time.Now().Add(20 * time.Second)
	for len(again) < 2 && time.Now().Before(deadline) {
		cr, err := c.Poll(ctx, time.Second)
		if err != nil {
			continue
		}
		for _, m := range cr.GetMsgList() {
			again = append(again, string(m.Body))
		}
		c.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	if len(again) < 2 || again[0] != "m8" || again[1] != "m9" {
		t.Fatalf("after seek to 8: %v", again)
	}

	// Search by timestamp: the start of time is offset 0.
	if off, err := c.OffsetForTimestamp(mq, 0); err != nil || off != 0 {
		t.Fatalf("offset for time 0: %d %v", off, err)
	}
}
