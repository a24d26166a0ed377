package mqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/mqlite/mqlite"
)

// Request and reply: a push consumer answers each request with
// Store.Reply; Request returns that reply, or ErrRequestTimeout.
func ExampleStore_Reply() {
	s, err := mqlite.Open("rpc", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	if err := s.CreateTopic("quotes", mqlite.TopicConfig{Queues: 2}); err != nil {
		log.Fatal(err)
	}
	// From the first offset: a request stored before the consumer got its
	// queues is still answered.
	c, err := s.NewPushConsumer("pricing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("quotes", nil); err != nil {
		log.Fatal(err)
	}
	err = c.Start(func(ctx context.Context, ms []*mqlite.MessageExt) mqlite.ConsumeResult {
		for _, m := range ms {
			if _, err := s.Reply(ctx, m, []byte("price of "+string(m.Body)+": 42")); err != nil {
				return mqlite.ReconsumeLater
			}
		}
		return mqlite.ConsumeSuccess
	})
	if err != nil {
		log.Fatal(err)
	}

	p, err := s.NewProducer(mqlite.ProducerOptions{RequestTimeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := p.Request(ctx, &mqlite.Message{Topic: "quotes", Body: []byte("apples")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(rep.Body), rep.Topic)

	_, err = s.Reply(ctx, rep, []byte("a reply to a reply"))
	fmt.Println(errors.Is(err, mqlite.ErrNotRequest), errors.Is(err, mqlite.ErrInvalidArgument))
	// Output:
	// price of apples: 42 rmq_sys_REPLY_TOPIC
	// true true
}
