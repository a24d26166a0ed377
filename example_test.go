package mqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
)

// A store in a directory: what is put survives Close and Open.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "mqlite-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := mqlite.Open(dir, &mqlite.Options{Flush: mqlite.FlushSync}) // nil: the defaults
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("order 1")}, 0)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	s, err = mqlite.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := s.MessageByID(res.MsgID())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s queue %d offset %d: %s\n", m.Topic, m.QueueID, m.QueueOffset, m.Body)
	_, err = s.Put(ctx, &mqlite.Message{Topic: "orders"}, 0)
	fmt.Println(errors.Is(err, mqlite.ErrEmptyBody), errors.Is(err, mqlite.ErrInvalidArgument))
	// Output:
	// orders queue 0 offset 0: order 1
	// true true
}

// A producer picks the queue: messages with one sharding key go to one
// queue, in send order.
func ExampleStore_NewProducer() {
	s, err := mqlite.Open("orders", &mqlite.Options{InMemory: true}) // no files: for tests
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("orders", mqlite.TopicConfig{Queues: 8}); err != nil {
		log.Fatal(err)
	}
	p, err := s.NewProducer(mqlite.ProducerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	queues := map[int]bool{}
	for _, event := range []string{"created", "paid", "shipped"} {
		res, err := p.Send(context.Background(), &mqlite.Message{Topic: "orders", Tags: event,
			ShardingKey: "order-42", Keys: []string{"order-42"}, Body: []byte(event)})
		if err != nil {
			log.Fatal(err)
		}
		queues[res.QueueID] = true
	}
	if err := s.WaitVisible(context.Background()); err != nil { // indexed: readable by key
		log.Fatal(err)
	}
	hits, err := s.MessagesByKey("orders", "order-42", time.Time{}, time.Now().Add(time.Minute), 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("queues used:", len(queues))
	for _, m := range hits { // newest first
		fmt.Println(m.QueueOffset, string(m.Body))
	}
	// Output:
	// queues used: 1
	// 2 shipped
	// 1 paid
	// 0 created
}

// A push consumer group with a tag filter: the handler runs on the
// group's pool of goroutines, and Shutdown commits what it consumed.
func ExampleStore_NewPushConsumer() {
	s, err := mqlite.Open("billing", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("orders", mqlite.TopicConfig{Queues: 1}); err != nil {
		log.Fatal(err)
	}
	for i, event := range []string{"created", "paid", "created", "paid"} {
		body := fmt.Sprintf("order %d %s", i/2, event)
		if _, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Tags: event, Body: []byte(body)}, 0); err != nil {
			log.Fatal(err)
		}
	}

	c, err := s.NewPushConsumer("billing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	if err != nil {
		log.Fatal(err)
	}
	paid, err := mqlite.Tag("paid")
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("orders", paid); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	err = c.Start(func(ctx context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if got = append(got, string(m.Body)); len(got) == 2 {
				close(done)
			}
		}
		return mqlite.ConsumeSuccess // or ReconsumeLater: retried later, then dead-lettered
	})
	if err != nil {
		log.Fatal(err)
	}
	<-done
	if err := c.Shutdown(ctx); err != nil { // drains the handlers, commits
		log.Fatal(err)
	}
	// The handler runs on several goroutines (ConsumerOptions.Goroutines,
	// 20 by default), so deliveries may finish in any order;
	// ConsumerOptions.Orderly keeps each queue's order.
	slices.Sort(got)
	fmt.Println(got)
	lag, err := s.ConsumerLag("billing")
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range lag {
		if q.Topic == "orders" { // also listed: the group's retry topic
			// Filtered-out messages advance the offset too.
			fmt.Printf("committed %d of %d, lag %d\n", q.Committed, q.MaxOffset, q.Lag)
		}
	}
	// Output:
	// [order 0 paid order 1 paid]
	// committed 4 of 4, lag 0
}

// A pull consumer: Poll blocks until messages arrive (woken by the store,
// no polling interval) or its context ends; Commit records the progress.
func ExampleStore_NewPullConsumer() {
	s, err := mqlite.Open("audit", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.CreateTopic("audit", mqlite.TopicConfig{Queues: 1}); err != nil {
		log.Fatal(err)
	}
	pc, err := s.NewPullConsumer("auditors", mqlite.ConsumerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("audit", nil); err != nil { // nil: every message
		log.Fatal(err)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for _, b := range []string{"login", "logout"} {
			if _, err := s.Put(ctx, &mqlite.Message{Topic: "audit", Body: []byte(b)}, 0); err != nil {
				log.Print(err)
			}
		}
	}()
	for seen := 0; seen < 2; {
		msgs, err := pc.Poll(ctx, 32)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			fmt.Println(m.QueueOffset, string(m.Body))
		}
		seen += len(msgs)
	}
	<-sent
	if err := pc.Commit(); err != nil {
		log.Fatal(err)
	}
	next, err := pc.Position("audit", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next:", next)
	// Output:
	// 0 login
	// 1 logout
	// next: 2
}

// A transactional send: the message stays invisible (a half message) until
// the local transaction commits; the checker answers for one left unknown.
func ExampleStore_NewTransactionProducer() {
	s, err := mqlite.Open("payments", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("payments", mqlite.TopicConfig{Queues: 1}); err != nil {
		log.Fatal(err)
	}
	checker := func(ctx context.Context, m *mqlite.MessageExt) mqlite.TxState {
		return mqlite.RollbackMessage // after a crash: look up the local outcome
	}
	tp, err := s.NewTransactionProducer(checker, mqlite.TransactionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer tp.Close()
	for _, outcome := range []mqlite.TxState{mqlite.CommitMessage, mqlite.RollbackMessage} {
		m := &mqlite.Message{Topic: "payments", Body: []byte(outcome.String())}
		_, err := tp.SendInTransaction(ctx, m, func(ctx context.Context, m *mqlite.Message) mqlite.TxState {
			return outcome // the local transaction's result
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		log.Fatal(err)
	}
	for m, err := range s.Messages("payments", 0, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(m.Body))
	}
	// Output:
	// COMMIT_MESSAGE
}

// Delayed messages on virtual time: with a fake clock the store delivers
// them when the test moves the clock, not after a real wait.
func ExampleOptions_clock() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	s, err := mqlite.Open("timers", &mqlite.Options{InMemory: true, Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	m := &mqlite.Message{Topic: "reminders", Body: []byte("call back"), DelayLevel: 3} // 10 s
	if _, err := s.Put(ctx, m, 0); err != nil {
		log.Fatal(err)
	}
	if err := s.WaitVisible(ctx); err != nil {
		log.Fatal(err)
	}
	n, err := s.MaxOffset("reminders", 0)
	fmt.Println("before:", n, err)

	clk.Advance(10 * time.Second)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds a failure only
	defer cancel()
	msgs, err := s.ReadQueue(wait, "reminders", 0, 0, 1) // blocks until it is there
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after:", string(msgs[0].Body), msgs[0].StoreTimestamp.Sub(clk.Now()) <= 0)
	// Output:
	// before: 0 <nil>
	// after: call back true
}
