package broker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/mqlite/mqlite"
)

func sendN(t *testing.T, p rocketmq.Producer, topic, prefix string, n int, decorate func(*primitive.Message, int)) {
	t.Helper()
	for i := range n {
		m := primitive.NewMessage(topic, fmt.Appendf(nil, "%s%d", prefix, i))
		if decorate != nil {
			decorate(m, i)
		}
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %s%d: %v", prefix, i, err)
		}
	}
}

// memberEnv makes the test binary a push consumer ("addr|group|topic")
// printing "GOT body" per message: a group member that can stop the way
// processes stop, and whose client library shuts down outside this process.
const memberEnv = "MQLITE_BROKER_MEMBER"

func runMember(spec string) {
	parts := strings.Split(spec, "|")
	rlog.SetLogLevel("fatal")
	var mu sync.Mutex
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{parts[0]}), consumer.WithGroupName(parts[1]),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithInstance("member-child"))
	if err == nil {
		err = c.Subscribe(parts[2], consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				fmt.Printf("GOT %s\n", m.Body)
			}
			return consumer.ConsumeSuccess, nil
		})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	select {}
}

// startMember runs a group member in a child process; kill stops it.
func startMember(t *testing.T, addr, group, topic string) (*collect, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+addr+"|"+group+"|"+topic)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got collect
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if body, ok := strings.CutPrefix(sc.Text(), "GOT "); ok {
				got.mu.Lock()
				got.msgs = append(got.msgs, &primitive.MessageExt{Message: primitive.Message{Body: []byte(body)}})
				got.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
			<-read
		})
	}
	t.Cleanup(kill)
	return &got, kill
}

func TestClusteringTwoInstancesAndRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a client process")
	}
	f := startBroker(t, nil, nil)
	topic, group := uniq("T"), uniq("g")
	var b collect
	a, stopA := startMember(t, f.b.Addr(), group, topic)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, b.handle)
	eventually(t, 10*time.Second, "two members", func() bool { return len(f.b.clients.members(group)) == 2 })
	p := newProducer(t, f)
	sendN(t, p, topic, "first", 40, nil)
	eventually(t, 20*time.Second, "40 messages", func() bool { return a.count()+b.count() >= 40 })
	if a.count() == 0 || b.count() == 0 {
		t.Fatalf("one member got everything: %d and %d", a.count(), b.count())
	}
	seen := map[string]int{}
	for k, v := range a.bodies() {
		seen[k] += v
	}
	for k, v := range b.bodies() {
		seen[k] += v
	}
	for i := range 40 {
		if n := seen[fmt.Sprintf("first%d", i)]; n != 1 {
			t.Fatalf("first%d delivered %d times across the group", i, n)
		}
	}
	// One member stops: the other takes over every queue.
	stopA()
	eventually(t, 10*time.Second, "one member", func() bool { return len(f.b.clients.members(group)) == 1 })
	sendN(t, p, topic, "second", 20, nil)
	eventually(t, 30*time.Second, "the second batch on the remaining member", func() bool {
		got := b.bodies()
		for i := range 20 {
			if got[fmt.Sprintf("second%d", i)] == 0 {
				return false
			}
		}
		return true
	})
}

func TestBroadcasting(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic, group := uniq("T"), uniq("g")
	var a, b collect
	opt := consumer.WithConsumerModel(consumer.BroadCasting)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, a.handle, opt)
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, b.handle, opt)
	eventually(t, 10*time.Second, "two members", func() bool { return len(f.b.clients.members(group)) == 2 })
	p := newProducer(t, f)
	sendN(t, p, topic, "m", 10, nil)
	eventually(t, 20*time.Second, "10 messages on each member", func() bool { return a.count() >= 10 && b.count() >= 10 })
	for _, c := range []*collect{&a, &b} {
		got := c.bodies()
		for i := range 10 {
			if got[fmt.Sprintf("m%d", i)] != 1 {
				t.Fatalf("member missed or repeated m%d: %v", i, got)
			}
		}
	}
}

func TestTagAndSQLSelectors(t *testing.T) {
	f := startBroker(t, nil, nil)
	topic := uniq("T")
	var tags, sql, all collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "A || C"}, tags.handle)
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "n > 5 AND TAGS = 'B'"}, sql.handle)
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, all.handle)
	p := newProducer(t, f)
	sendN(t, p, topic, "m", 12, func(m *primitive.Message, i int) {
		m.WithTag([]string{"A", "B", "C"}[i%3])
		m.WithProperty("n", fmt.Sprint(i))
	})
	eventually(t, 20*time.Second, "all 12 on the unfiltered group", func() bool { return all.count() >= 12 })
	eventually(t, 20*time.Second, "the tag group's 8", func() bool { return tags.count() >= 8 })
	eventually(t, 20*time.Second, "the SQL group's 2", func() bool { return sql.count() >= 2 })
	for body := range tags.bodies() {
		var i int
		fmt.Sscanf(body, "m%d", &i)
		if i%3 == 1 {
			t.Fatalf("tag group got %s (tag B)", body)
		}
	}
	got := sql.bodies()
	if len(got) != 2 || got["m7"] != 1 || got["m10"] != 1 {
		t.Fatalf("SQL group got %v, want m7 and m10", got)
	}
}

func TestRetryLaterThenDLQ(t *testing.T) {
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 100 * time.Millisecond
	}
	f := startBroker(t, &mqlite.Options{DelayLevels: levels}, &Options{DelayLevels: levels})
	topic, group := uniq("T"), uniq("g")
	var mu sync.Mutex
	var deliveries []*primitive.MessageExt
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		deliveries = append(deliveries, msgs...)
		mu.Unlock()
		return consumer.ConsumeRetryLater, nil
	}
	newPushConsumer(t, f, group, topic, consumer.MessageSelector{}, h, consumer.WithMaxReconsumeTimes(2))
	p := newProducer(t, f)
	sendN(t, p, topic, "fail", 1, nil)
	// Delivered once, then twice from %RETRY%group, then to %DLQ%group.
	eventually(t, 30*time.Second, "the message in the DLQ", func() bool {
		dead, err := f.store.DeadLetters(group, 0, 10)
		return err == nil && len(dead) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 3 {
		t.Fatalf("%d deliveries, want 3 (1 + 2 retries)", len(deliveries))
	}
	for i, m := range deliveries {
		if string(m.Body) != "fail0" || m.ReconsumeTimes != int32(i) || m.Topic != topic {
			t.Fatalf("delivery %d: %s reconsume %d topic %s", i, m.Body, m.ReconsumeTimes, m.Topic)
		}
	}
	if max, err := f.store.MaxOffset("%RETRY%"+group, 0); err != nil || max != 2 {
		t.Fatalf("retry queue holds %d (%v), want 2", max, err)
	}
}
