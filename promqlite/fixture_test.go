package promqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// fixture is an in-memory store on a fake clock holding known content:
// topic "orders" with 2 queues (3 messages on queue 0, 1 on queue 1), a
// group "billing" with one live pull consumer that committed offset 2 on
// queue 0, and one message of "orders" dead-lettered by "billing".
type fixture struct {
	s   *mqlite.Store
	clk *clock.Fake
	c   *mqlite.PullConsumer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := mqlite.Open("promtest", &mqlite.Options{InMemory: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{s: s, clk: clk}
	t.Cleanup(func() {
		if f.c != nil {
			_ = f.c.Close()
		}
		_ = s.Close()
	})
	ctx := context.Background()
	if err := s.CreateTopic("orders", mqlite.TopicConfig{Queues: 2}); err != nil {
		t.Fatal(err)
	}
	for i, q := range []int{0, 0, 0, 1} {
		m := &mqlite.Message{Topic: "orders", Body: []byte("order-" + string(rune('a'+i)))}
		if _, err := s.Put(ctx, m, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := s.NewPullConsumer("billing", mqlite.ConsumerOptions{InstanceName: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	if err := c.Assign("orders", nil, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitOffset("orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.ReadQueue(ctx, "orders", 1, 0, 1)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReadQueue: %v, %d messages", err, len(msgs))
	}
	msgs[0].ReconsumeTimes = 100 // past any limit: straight to the DLQ
	if err := s.SendBack(ctx, "billing", msgs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitVisible(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}
