package consumer_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

func ExampleManager_NewPushConsumer() {
	st := newExampleStore("orders", "created-1", "paid-1", "created-2")
	// The root package creates the Manager over its Store and config dir;
	// here an in-memory store and file system stand in.
	mg, err := consumer.NewManager(st, consumer.ManagerOptions{FS: vfs.NewMem(), Dir: "/store/config"})
	if err != nil {
		log.Fatal(err)
	}
	defer mg.Close()

	c, err := mg.NewPushConsumer("billing", consumer.Options{
		Orderly:          true, // one call at a time per queue, in queue order
		ConsumeFromWhere: consumer.ConsumeFromFirstOffset,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("orders", nil); err != nil { // nil filter: every message
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	err = c.Start(func(ctx context.Context, msgs []*message.MessageExt) consumer.ConsumeResult {
		for _, m := range msgs {
			fmt.Printf("%s@%d %s\n", m.Topic, m.QueueOffset, m.Body)
			wg.Done()
		}
		return consumer.ConsumeSuccess
	})
	if err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	// Graceful: stop fetching, let running calls finish, commit, persist.
	if err := c.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	offs, _ := mg.Offsets("billing")
	fmt.Println("committed:", offs[0].Offset)
	// Output:
	// orders@0 created-1
	// orders@1 paid-1
	// orders@2 created-2
	// committed: 3
}

func ExampleManager_NewPullConsumer() {
	st := newExampleStore("audit", "a", "b", "c", "d", "e")
	mg, err := consumer.NewManager(st, consumer.ManagerOptions{FS: vfs.NewMem(), Dir: "/store/config"})
	if err != nil {
		log.Fatal(err)
	}
	defer mg.Close()

	pc, err := mg.NewPullConsumer("auditors", consumer.Options{ConsumeFromWhere: consumer.ConsumeFromFirstOffset})
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("audit", nil); err != nil { // joins the group's rebalance
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seen []string
	for range 2 {
		msgs, err := pc.Poll(ctx, 2) // blocks until messages arrive (long poll)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			seen = append(seen, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
		}
		if err := pc.Commit(); err != nil { // commit after processing
			log.Fatal(err)
		}
	}
	fmt.Println(strings.Join(seen, " "))
	if err := pc.Seek("audit", 0, 1); err != nil { // replay from offset 1
		log.Fatal(err)
	}
	msgs, _ := pc.Poll(ctx, 1)
	fmt.Printf("after seek: %s\n", msgs[0].Body)
	lag, _ := mg.Lag("auditors")
	fmt.Printf("lag: %d\n", lag[0].Lag)
	// Output:
	// 0:a 1:b 2:c 3:d
	// after seek: b
	// lag: 1
}

// With ReuseMessages, a Poll's messages live until the next Poll: whatever
// must outlive them is copied (Clone for a whole message, strings.Clone
// for a string kept as a map key). The root package's Store then decodes
// into recycled memory, so a drain allocates almost nothing.
func ExampleOptions_reuseMessages() {
	st := newExampleStore("audit", "a", "b", "c")
	mg, err := consumer.NewManager(st, consumer.ManagerOptions{FS: vfs.NewMem(), Dir: "/store/config"})
	if err != nil {
		log.Fatal(err)
	}
	defer mg.Close()
	pc, err := mg.NewPullConsumer("auditors", consumer.Options{ConsumeFromWhere: consumer.ConsumeFromFirstOffset,
		ReuseMessages: true, AutoCommit: true})
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("audit", nil); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var kept *message.MessageExt
	seen := map[string]bool{}
	for len(seen) < 3 {
		msgs, err := pc.Poll(ctx, 2)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			seen[strings.Clone(m.MsgID)] = true
			if kept == nil {
				kept = m.Clone() // still valid after the next Poll
			}
		}
	}
	fmt.Printf("seen %d, kept %s\n", len(seen), kept.Body)
	// Output:
	// seen 3, kept a
}

// exampleStore is a minimal in-memory consumer.Source with one topic of one
// queue; the root package's Store plays this part in real use.
type exampleStore struct {
	topic   string
	mu      sync.Mutex
	msgs    []*message.MessageExt
	changed chan struct{}
}

func newExampleStore(topic string, bodies ...string) *exampleStore {
	s := &exampleStore{topic: topic, changed: make(chan struct{})}
	for i, b := range bodies {
		s.msgs = append(s.msgs, &message.MessageExt{Message: message.Message{Topic: topic, Body: []byte(b)}, QueueOffset: int64(i),
			MsgID: message.ID(int64(i))})
	}
	return s
}

func (s *exampleStore) QueueCount(topic string) (int, error) {
	if topic != s.topic {
		return 0, errs.ErrTopicNotFound
	}
	return 1, nil
}

func (s *exampleStore) MinOffset(topic string, queue int) (int64, error) { return 0, nil }

func (s *exampleStore) MaxOffset(topic string, queue int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.msgs)), nil
}

func (s *exampleStore) OffsetForTime(topic string, queue int, t time.Time) (int64, error) {
	return 0, nil
}

func (s *exampleStore) Pull(ctx context.Context, topic string, queue int, from int64, max int, f consumer.Filter, _ *message.Pool) ([]*message.MessageExt, int64, error) {
	for {
		s.mu.Lock()
		if from < int64(len(s.msgs)) {
			end := min(from+int64(max), int64(len(s.msgs)))
			var out []*message.MessageExt
			for _, m := range s.msgs[from:end] {
				c := *m
				out = append(out, &c)
			}
			s.mu.Unlock()
			return out, end, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

func (s *exampleStore) SendBack(ctx context.Context, group string, m *message.MessageExt) error {
	return nil
}
