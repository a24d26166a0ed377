package producer_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// open returns a store for the examples: in memory, flushed synchronously.
func open() *mqlite.Store {
	s, err := mqlite.Open("example", &mqlite.Options{InMemory: true, Flush: mqlite.FlushSync})
	if err != nil {
		panic(err)
	}
	return s
}

func ExampleProducer_Send() {
	s := open()
	defer s.Close()
	s.CreateTopic("orders", mqlite.TopicConfig{Queues: 4})
	p, _ := s.NewProducer(mqlite.ProducerOptions{})
	defer p.Close()

	res, err := p.Send(context.Background(), &mqlite.Message{Topic: "orders", Tags: "created", Keys: []string{"o-42"}, Body: []byte("hello")})
	fmt.Println(res.Status, err, res.QueueOffset)
	// Output: SEND_OK <nil> 0
}

func ExampleProducer_SendAsync() {
	s := open()
	defer s.Close()
	p, _ := s.NewProducer(mqlite.ProducerOptions{})
	// The callback runs on another goroutine, maybe before SendAsync
	// returns: it hands its line over, so that the output keeps its order.
	result := make(chan string, 1)
	err := p.SendAsync(context.Background(), &mqlite.Message{Topic: "events", Body: []byte("hi")}, func(res mqlite.SendResult, err error) {
		result <- fmt.Sprintf("callback: %v %v", res.Status, err)
	})
	fmt.Println("accepted:", err)
	fmt.Println(<-result)
	p.Close() // waits for callbacks still pending
	// Output:
	// accepted: <nil>
	// callback: SEND_OK <nil>
}

func ExampleProducer_SendOneway() {
	s := open()
	defer s.Close()
	p, _ := s.NewProducer(mqlite.ProducerOptions{})
	defer p.Close()
	fmt.Println(p.SendOneway(&mqlite.Message{Topic: "metrics", Body: []byte("cpu=0.5")}))
	// Output: <nil>
}

func ExampleProducer_SendBatch() {
	s := open()
	defer s.Close()
	p, _ := s.NewProducer(mqlite.ProducerOptions{})
	defer p.Close()
	var batch []*mqlite.Message
	for i := range 3 {
		batch = append(batch, &mqlite.Message{Topic: "logs", Body: fmt.Appendf(nil, "line %d", i)})
	}
	rs, err := p.SendBatch(context.Background(), batch)
	fmt.Println(len(rs), err, rs[0].QueueID == rs[2].QueueID, rs[2].QueueOffset-rs[0].QueueOffset)
	// Output: 3 <nil> true 2
}

// Messages with the same ShardingKey go to the same queue, so a consumer
// sees them in send order.
func ExampleProducer_Send_ordered() {
	s := open()
	defer s.Close()
	s.CreateTopic("orders", mqlite.TopicConfig{Queues: 8})
	p, _ := s.NewProducer(mqlite.ProducerOptions{})
	defer p.Close()
	ctx := context.Background()
	var queues []int
	for _, step := range []string{"created", "paid", "shipped"} {
		res, _ := p.Send(ctx, &mqlite.Message{Topic: "orders", Tags: step, ShardingKey: "order-42", Body: []byte(step)})
		queues = append(queues, res.QueueID)
	}
	fmt.Println(queues[0] == queues[1] && queues[1] == queues[2])
	s.WaitVisible(ctx) // the dispatcher indexes sent messages in the background
	msgs, _ := s.ReadQueue(ctx, "orders", queues[0], 0, 10)
	for _, m := range msgs {
		fmt.Print(m.Tags, " ")
	}
	fmt.Println()
	// Output:
	// true
	// created paid shipped
}
