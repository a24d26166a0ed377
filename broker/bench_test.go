package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// benchSend runs b.N SendSync calls of 128 B over 16 goroutines (one client
// producer, as an application shares one) and reports msgs/s and the
// p50/p99 latency of a send.
func benchSend(b *testing.B, f *fixture) {
	p := newProducer(b, f)
	topic := uniq("B")
	body := make([]byte, 128)
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body)); err != nil {
		b.Fatal(err)
	}
	const workers = 16
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body)); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/el.Seconds(), "msgs/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}

func BenchmarkSend16(b *testing.B) {
	b.Run("async-flush", func(b *testing.B) { benchSend(b, startBroker(b, nil, nil)) })
	b.Run("sync-flush", func(b *testing.B) { benchSend(b, startBroker(b, &mqlite.Options{Flush: mqlite.FlushSync}, nil)) })
	b.Run("noop-server", func(b *testing.B) { benchSend(b, startNoop(b)) })
}

// BenchmarkDrain: one push consumer drains a backlog of b.N 128 B messages.
func BenchmarkDrain(b *testing.B) {
	f := startBroker(b, nil, nil)
	topic := uniq("D")
	if err := f.store.CreateTopic(topic, mqlite.TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 128)
	for i := 0; i < b.N; {
		n := min(256, b.N-i)
		msgs := make([]*mqlite.Message, n)
		for j := range msgs {
			msgs[j] = &mqlite.Message{Topic: topic, Body: body}
		}
		if _, err := f.store.PutBatch(context.Background(), msgs, i/256%4); err != nil {
			b.Fatal(err)
		}
		i += n
	}
	if err := f.store.WaitVisible(context.Background()); err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if got.Add(int64(len(msgs))) >= int64(b.N) {
			once.Do(func() { close(done) })
		}
		return consumer.ConsumeSuccess, nil
	}
	b.ResetTimer()
	start := time.Now()
	newPushConsumer(b, f, uniq("g"), topic, consumer.MessageSelector{}, h, consumer.WithConsumeMessageBatchMaxSize(32), consumer.WithPullBatchSize(32))
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d", got.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// startNoop serves routes and acknowledges sends without storing them:
// the client's own cost, the ceiling of any broker behind it.
func startNoop(b *testing.B) *fixture { return startNoopBacklog(b, 0) }

// noopConsume answers what a push consumer asks: heartbeats, its group
// (itself), offset 0, and pulls from a canned backlog of perQueue 128 B
// messages per queue.
func noopConsume(resp, req *remoting.Command, perQueue int64) {
	switch req.Code {
	case reqHeartBeat:
		var hb heartbeat
		json.Unmarshal(req.Body, &hb)
		noopClient.Store(hb.ClientID)
	case reqGetConsumerListByGroup:
		id, _ := noopClient.Load().(string)
		resp.Body, _ = json.Marshal(map[string]any{"consumerIdList": []string{id}})
	case reqQueryConsumerOffset, reqGetMaxOffset, reqGetMinOffset:
		resp.ExtFields["offset"] = "0"
	case reqPullMessage:
		h, _ := parsePullHeader(req)
		n := min(int64(h.max), perQueue-h.offset)
		if n <= 0 {
			resp.Code = resPullNotFound
			n = 0
		}
		fake := &Broker{}
		fake.host.ip, fake.host.port = []byte{127, 0, 0, 1}, 1
		m := &mqlite.MessageExt{Message: mqlite.Message{Topic: h.topic, Body: make([]byte, 128)}, QueueID: h.queue}
		for i := range n {
			m.QueueOffset = h.offset + i
			resp.Body = fake.appendMessage(resp.Body, m, nil)
		}
		resp.ExtFields["nextBeginOffset"] = strconv.FormatInt(h.offset+n, 10)
		resp.ExtFields["minOffset"] = "0"
		resp.ExtFields["maxOffset"] = strconv.FormatInt(perQueue, 10)
	}
}

var noopClient atomic.Value

// BenchmarkDrainNoop: the push consumer against a server answering pulls
// from memory, the consumer's own ceiling for BenchmarkDrain.
func BenchmarkDrainNoop(b *testing.B) {
	f := startNoopBacklog(b, int64(b.N+3)/4)
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if got.Add(int64(len(msgs))) >= int64(b.N) {
			once.Do(func() { close(done) })
		}
		return consumer.ConsumeSuccess, nil
	}
	b.ResetTimer()
	start := time.Now()
	newPushConsumer(b, f, uniq("g"), uniq("D"), consumer.MessageSelector{}, h, consumer.WithConsumeMessageBatchMaxSize(32), consumer.WithPullBatchSize(32))
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d", got.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func startNoopBacklog(b *testing.B, perQueue int64) *fixture {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	route := fmt.Sprintf(`{"queueDatas":[{"brokerName":"noop","readQueueNums":4,"writeQueueNums":4,"perm":6}],"brokerDatas":[{"cluster":"c","brokerName":"noop","brokerAddrs":{"0":%q}}]}`, addr)
	var seq atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				var wmu sync.Mutex
				for {
					frame, err := remoting.ReadFrame(nc, remoting.DefaultMaxFrame)
					if err != nil {
						return
					}
					req, err := remoting.Decode(frame)
					if err != nil {
						return
					}
					if req.IsResponse() {
						continue
					}
					resp := remoting.NewResponse(req, resSuccess, "")
					switch req.Code {
					case reqGetRouteInfoByTopic:
						resp.Body = []byte(route)
					case reqSendMessage, reqSendMessageV2:
						resp.ExtFields["msgId"] = fmt.Sprintf("7F00000100002A9F%016X", seq.Add(1))
						resp.ExtFields["queueId"] = "0"
						resp.ExtFields["queueOffset"] = "0"
					default:
						noopConsume(resp, req, perQueue)
					}
					out, _ := remoting.Encode(resp)
					wmu.Lock()
					nc.Write(out)
					wmu.Unlock()
				}
			}()
		}
	}()
	return &fixture{t: b, nsAddr: primitive.NamesrvAddr{addr}}
}
