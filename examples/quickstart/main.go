// Command quickstart opens a store in a temporary directory and walks
// through the main features: a topic, a producer sending ordered messages
// with FlushSync, a consumer group with a tag filter, a restart that keeps
// messages and the group's progress, a delayed message, and a handler
// failure that is retried.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/mqlite/mqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "mqlite-quickstart-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := &mqlite.Options{Flush: mqlite.FlushSync, SegmentSize: 64 << 20}
	ctx := context.Background()

	s, err := mqlite.Open(dir, opts)
	check(err)
	fmt.Printf("opened store in %s (FlushSync: a send returns once it is on disk)\n", dir)
	check(s.CreateTopic("orders", mqlite.TopicConfig{Queues: 4}))
	p, err := s.NewProducer(mqlite.ProducerOptions{})
	check(err)
	var ids []string
	for i := range 6 {
		tag := []string{"created", "paid"}[i%2]
		m := &mqlite.Message{Topic: "orders", Tags: tag, ShardingKey: fmt.Sprintf("order-%d", i/2),
			Keys: []string{fmt.Sprintf("order-%d", i/2)}, Body: []byte(fmt.Sprintf(`{"order":%d,"event":%q}`, i/2, tag))}
		res, err := p.Send(ctx, m)
		check(err)
		ids = append(ids, res.MsgID())
		fmt.Printf("sent     %s %-7s queue=%d offset=%d id=%s\n", m.Keys[0], tag, res.QueueID, res.QueueOffset, res.MsgID())
	}

	// A consumer group that only wants "paid" events.
	paid, err := mqlite.Tag("paid")
	check(err)
	consume(s, "billing", paid, 3)
	check(s.Close())
	fmt.Println("closed; reopening")

	s, err = mqlite.Open(dir, opts)
	check(err)
	defer s.Close()
	m, err := s.MessageByID(ids[0])
	check(err)
	fmt.Printf("by id    %s -> %s\n", ids[0], m.Body)
	p, err = s.NewProducer(mqlite.ProducerOptions{})
	check(err)
	_, err = p.Send(ctx, &mqlite.Message{Topic: "orders", Tags: "paid", Body: []byte(`{"order":3,"event":"paid"}`)})
	check(err)
	fmt.Println("billing resumes after its committed offset: only the new message")
	consume(s, "billing", paid, 1)

	// A delayed message (level 1 = 1 s) and a handler that fails once.
	start := time.Now()
	_, err = p.Send(ctx, &mqlite.Message{Topic: "orders", Tags: "reminder", DelayLevel: 1, Body: []byte("pay soon")})
	check(err)
	rem, err := mqlite.Tag("reminder")
	check(err)
	consumeFailingOnce(s, "reminders", rem, 1)
	fmt.Printf("the delayed message arrived, failed once and was consumed on its retry after %.1fs\n", time.Since(start).Seconds())
}

// consume runs a push consumer of group until it has consumed n messages.
func consume(s *mqlite.Store, group string, f mqlite.Filter, n int) { run(s, group, f, n, false) }

// consumeFailingOnce is consume with a handler that fails each message's
// first delivery: the store delivers it again (here after half a second;
// by default after 10 s, 30 s, 1 m, ... and then to the group's
// dead-letter queue).
func consumeFailingOnce(s *mqlite.Store, group string, f mqlite.Filter, n int) {
	run(s, group, f, n, true)
}

func run(s *mqlite.Store, group string, f mqlite.Filter, n int, failFirst bool) {
	c, err := s.NewPushConsumer(group, mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	check(err)
	check(c.Subscribe("orders", f))
	var mu sync.Mutex
	seen := 0
	done := make(chan struct{})
	check(c.Start(func(_ context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if failFirst && m.ReconsumeTimes == 0 {
				fmt.Printf("failed   %s group=%s %s: retry later\n", m.Tags, group, m.Body)
				mqlite.RetryAfter(m, 500*time.Millisecond)
				return mqlite.ReconsumeLater // the whole batch: here one message
			}
			fmt.Printf("consumed %s group=%s queue=%d offset=%d reconsumed=%d %s\n", m.Tags, group, m.QueueID, m.QueueOffset, m.ReconsumeTimes, m.Body)
			if seen++; seen == n {
				close(done)
			}
		}
		return mqlite.ConsumeSuccess
	}))
	<-done
	check(c.Shutdown(context.Background())) // commits the group's progress
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
