package mqlite_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mqlite/mqlite"
)

// Replaying a topic to a consumer group that is not running: reset its
// offsets to a time (the zero time: everything still stored), and its next
// consumer starts there, as RocketMQ's resetOffsetByTime does.
func ExampleStore_ResetConsumerOffsets() {
	s, err := mqlite.Open("replay-group", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("events", mqlite.TopicConfig{Queues: 1}); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Put(ctx, &mqlite.Message{Topic: "events", Body: fmt.Appendf(nil, "event %d", i)}, 0); err != nil {
			log.Fatal(err)
		}
	}
	consume := func() {
		c, err := s.NewPullConsumer("audit", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset, AutoCommit: true})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		if err := c.Subscribe("events", nil); err != nil {
			log.Fatal(err)
		}
		for n := 0; n < 3; {
			msgs, err := c.Poll(ctx, 10)
			if err != nil {
				log.Fatal(err)
			}
			for _, m := range msgs {
				fmt.Println(string(m.Body))
			}
			n += len(msgs)
		}
	}
	consume()
	offs, err := s.ResetConsumerOffsets("audit", "events", time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reset %s to %d\n", offs[0].Queue, offs[0].Offset)
	consume()
	// Output:
	// event 0
	// event 1
	// event 2
	// reset events:0 to 0
	// event 0
	// event 1
	// event 2
}
