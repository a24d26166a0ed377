package mqlite_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mqlite/mqlite"
)

// Replaying a queue to a running push consumer: Seek commits the new
// position and delivers the queue again from there, as RocketMQ's reset of
// a group's offsets does.
func ExamplePushConsumer_Seek() {
	s, err := mqlite.Open("replay", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("events", mqlite.TopicConfig{Queues: 1}); err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Put(ctx, &mqlite.Message{Topic: "events", Body: fmt.Appendf(nil, "event %d", i)}, 0); err != nil {
			log.Fatal(err)
		}
	}
	c, err := s.NewPushConsumer("projector", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset, Goroutines: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("events", nil); err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 16)
	err = c.Start(func(_ context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return mqlite.ConsumeSuccess
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		fmt.Println(<-got)
	}
	if err := c.Seek("events", 0, 2); err != nil { // replay from queue offset 2
		log.Fatal(err)
	}
	for range 2 {
		fmt.Println("again:", <-got)
	}
	// Output:
	// event 0
	// event 1
	// event 2
	// event 3
	// again: event 2
	// again: event 3
}
