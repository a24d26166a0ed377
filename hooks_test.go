package mqlite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// eventLog records hook events in the order they run.
type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, fmt.Sprintf(format, args...))
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

type ctxKey string

// recordingHooks logs every event under name.
func recordingHooks(l *eventLog, name string) Hooks {
	return Hooks{
		BeforeSend: func(ctx context.Context, m *Message) context.Context {
			l.add("%s:BeforeSend %s", name, m.Topic)
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties["trace-"+name] = "t-" + name
			return context.WithValue(ctx, ctxKey(name), "send")
		},
		AfterSend: func(ctx context.Context, e SendEvent) {
			l.add("%s:AfterSend %s q%d o%d batch=%d err=%v ctx=%v", name, e.Message.Topic, e.Result.QueueID, e.Result.QueueOffset, e.Batch, e.Err, ctx.Value(ctxKey(name)))
		},
		Stored: func(e StoreEvent) {
			l.add("%s:Stored %s delayed=%t", name, e.Topic, e.Result.Delayed)
		},
		BeforeConsume: func(ctx context.Context, e ConsumeEvent) context.Context {
			l.add("%s:BeforeConsume %s n=%d pull=%t", name, e.Group, len(e.Messages), e.Pull)
			return context.WithValue(ctx, ctxKey(name), "consume")
		},
		AfterConsume: func(ctx context.Context, e ConsumeEvent) {
			l.add("%s:AfterConsume %s ok=%t ctx=%v", name, e.Group, e.Success, ctx.Value(ctxKey(name)))
		},
		Retry: func(e RetryEvent) {
			l.add("%s:Retry %s attempt=%d delay=%s", name, e.Group, e.Attempt, e.Delay)
		},
		DeadLetter: func(e RetryEvent) {
			l.add("%s:DeadLetter %s attempt=%d topic=%s", name, e.Group, e.Attempt, e.Topic)
		},
		Redrive: func(e RedriveEvent) {
			l.add("%s:Redrive %s to=%s", name, e.Group, e.Message.Topic)
		},
		TxDecision: func(e TxEvent) {
			l.add("%s:TxDecision %s %s", name, e.Topic, e.State)
		},
	}
}

// TestHooksSendAndConsumeOrder: a producer's send and a push consumer's
// delivery run the store-wide hooks, then the producer's or consumer's
// own, in the documented order; a property BeforeSend adds reaches the
// handler, and the context BeforeConsume returns is the handler's.
func TestHooksSendAndConsumeOrder(t *testing.T) {
	var l eventLog
	s, err := Open("/h", &Options{InMemory: true, Hooks: recordingHooks(&l, "s")})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	p, err := s.NewProducer(ProducerOptions{Hooks: recordingHooks(&l, "p")})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = p.Send(ctx, &Message{Topic: "orders", Body: []byte("x")})
	require.NoError(t, err)

	ch := hooks(&l)
	got := make(chan *MessageExt, 1)
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Hooks: ch})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("orders", nil))
	require.NoError(t, c.Start(func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		require.Equal(t, "consume", ctx.Value(ctxKey("s")))
		require.Equal(t, "consume", ctx.Value(ctxKey("c")))
		got <- msgs[0].Clone()
		return ConsumeSuccess
	}))
	m := <-got
	<-afterConsumed
	require.NoError(t, c.Shutdown(ctx))
	require.Equal(t, "t-s", m.Properties["trace-s"])
	require.Equal(t, "t-p", m.Properties["trace-p"])
	require.Equal(t, []string{
		"s:BeforeSend orders",
		"p:BeforeSend orders",
		"s:Stored orders delayed=false",
		"s:AfterSend orders q0 o0 batch=0 err=<nil> ctx=send",
		"p:AfterSend orders q0 o0 batch=0 err=<nil> ctx=send",
		"s:BeforeConsume g n=1 pull=false",
		"c:BeforeConsume g n=1 pull=false",
		"s:AfterConsume g ok=true ctx=consume",
		"c:AfterConsume g ok=true ctx=consume",
	}, l.list())
}

var afterConsumed = make(chan struct{}, 16)

// hooks is the consumer's recording hooks, with AfterConsume also
// signalling afterConsumed.
func hooks(l *eventLog) Hooks {
	h := recordingHooks(l, "c")
	after := h.AfterConsume
	h.AfterConsume = func(ctx context.Context, e ConsumeEvent) {
		after(ctx, e)
		afterConsumed <- struct{}{}
	}
	return h
}

// TestHooksBatchDelayedAndPull: a batch runs BeforeSend for each message,
// Stored for each, AfterSend for each; a delayed message is Stored under
// the schedule topic, then under its own when due; a Poll runs
// BeforeConsume with Pull set.
func TestHooksBatchDelayedAndPull(t *testing.T) {
	var l eventLog
	clk := clock.NewFake(t0)
	s, err := openFS(vfs.NewMem(), "/h", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Hooks: recordingHooks(&l, "s")}))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("b", TopicConfig{Queues: 1}))
	ctx := context.Background()
	msgs := []*Message{{Topic: "b", Body: []byte("1")}, {Topic: "b", Body: []byte("2")}}
	_, err = s.PutBatch(ctx, msgs, 0)
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "b", Body: []byte("later"), DelayLevel: 1}, 0)
	require.NoError(t, err)
	clk.Advance(time.Second)
	readRange(t, s, "b", 0, 2, 3)

	pc, err := s.NewPullConsumer("pg", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("b", nil))
	n := 0
	for n < 3 {
		got, err := pc.Poll(ctx, 3)
		require.NoError(t, err)
		n += len(got)
	}
	require.NoError(t, pc.Close())
	ev := l.list()
	require.Equal(t, []string{
		"s:BeforeSend b",
		"s:BeforeSend b",
		"s:Stored b delayed=false",
		"s:Stored b delayed=false",
		"s:AfterSend b q0 o0 batch=2 err=<nil> ctx=send",
		"s:AfterSend b q0 o1 batch=2 err=<nil> ctx=send",
		"s:BeforeSend b",
		"s:Stored SCHEDULE_TOPIC_XXXX delayed=true",
		"s:AfterSend b q0 o-1 batch=0 err=<nil> ctx=send",
		"s:Stored b delayed=false",
	}, ev[:10])
	for _, e := range ev[10:] {
		require.True(t, strings.HasPrefix(e, "s:BeforeConsume pg n="), e)
		require.Contains(t, e, "pull=true")
	}
}

// TestHooksRetryDeadLetterRedrive: a message failed twice, past a limit
// of 2, goes to the retry path twice, then dies, then is re-driven; each
// step runs its hook once, in order, with the attempt and delay.
func TestHooksRetryDeadLetterRedrive(t *testing.T) {
	var l eventLog
	clk := clock.NewFake(t0)
	h := recordingHooks(&l, "s")
	h.BeforeSend, h.AfterSend = nil, nil
	s, err := openFS(vfs.NewMem(), "/h", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Hooks: h}))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	ctx := context.Background()
	_, err = s.Put(ctx, &Message{Topic: "orders", Body: []byte("pay")}, 0)
	require.NoError(t, err)
	cur := readN(t, s, "orders", 0, 1)[0]
	cur.Properties = map[string]string{}
	for i, wait := range []time.Duration{10 * time.Second, 30 * time.Second} {
		cur.Properties[PropMaxReconsumeTimes] = "2"
		require.NoError(t, s.SendBack(ctx, "g", cur))
		clk.Advance(wait)
		cur = readRange(t, s, "%RETRY%g", 0, i, i+1)[0]
	}
	cur.Properties[PropMaxReconsumeTimes] = "2"
	require.NoError(t, s.SendBack(ctx, "g", cur))
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("g", 0, 1)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	_, err = s.Redrive(ctx, "g", dead[0].MsgID)
	require.NoError(t, err)
	require.Equal(t, []string{
		"s:Stored orders delayed=false",
		"s:Stored SCHEDULE_TOPIC_XXXX delayed=true",
		"s:Retry g attempt=1 delay=10s",
		"s:Stored %RETRY%g delayed=false",
		"s:Stored SCHEDULE_TOPIC_XXXX delayed=true",
		"s:Retry g attempt=2 delay=30s",
		"s:Stored %RETRY%g delayed=false",
		"s:Stored %DLQ%g delayed=false",
		"s:DeadLetter g attempt=2 topic=%DLQ%g",
		"s:Stored orders delayed=false",
		"s:Redrive g to=orders",
	}, l.list())
}

// TestHooksTransactionDecision: a commit and a rollback each run
// TxDecision once, with the real topic and the transaction's ID.
func TestHooksTransactionDecision(t *testing.T) {
	var mu sync.Mutex
	var got []TxEvent
	s, err := Open("/h", &Options{InMemory: true, Hooks: Hooks{TxDecision: func(e TxEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}}})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{Group: "g"})
	require.NoError(t, err)
	r1, err := tp.SendInTransaction(ctx, &Message{Topic: "pay", Body: []byte("a")}, func(context.Context, *Message) TxState { return CommitMessage })
	require.NoError(t, err)
	r2, err := tp.SendInTransaction(ctx, &Message{Topic: "pay", Body: []byte("b")}, func(context.Context, *Message) TxState { return RollbackMessage })
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	require.Equal(t, TxEvent{TransactionID: r1.TransactionID, Topic: "pay", State: "COMMIT_MESSAGE", HalfOffset: 0}, got[0])
	require.Equal(t, TxEvent{TransactionID: r2.TransactionID, Topic: "pay", State: "ROLLBACK_MESSAGE", HalfOffset: 1}, got[1])
}

// TestHookPanicsRecovered: hooks that panic on every event break neither
// sends nor deliveries; every panic is counted in Stats.HookPanics.
func TestHookPanicsRecovered(t *testing.T) {
	boom := func() { panic("boom") }
	h := Hooks{
		BeforeSend:    func(context.Context, *Message) context.Context { boom(); return nil },
		AfterSend:     func(context.Context, SendEvent) { boom() },
		Stored:        func(StoreEvent) { boom() },
		BeforeConsume: func(context.Context, ConsumeEvent) context.Context { boom(); return nil },
		AfterConsume:  func(context.Context, ConsumeEvent) { boom() },
	}
	s, err := Open("/h", &Options{InMemory: true, Hooks: h})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	ctx := context.Background()
	p, err := s.NewProducer(ProducerOptions{Hooks: h})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	require.NoError(t, err)
	// Send: 2 BeforeSend, Stored, 2 AfterSend.
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, int64(5), st.HookPanics)

	got := make(chan string, 1)
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Hooks: h})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("t", nil))
	require.NoError(t, c.Start(func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		got <- string(msgs[0].Body)
		return ConsumeSuccess
	}))
	require.Equal(t, "x", <-got)
	require.NoError(t, c.Shutdown(ctx))
	st, err = s.Stats()
	require.NoError(t, err)
	require.Equal(t, int64(9), st.HookPanics, "and 2 BeforeConsume, 2 AfterConsume")
	require.Equal(t, int64(1), c.Stats().Consumed)
}

// TestHooksUnsetAllocateNothing: with no hooks a Put allocates what it
// did before the hooks existed (one allocation on the in-memory store,
// measured on the commit before them).
func TestHooksUnsetAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop jobs: allocation counts mean nothing")
	}
	s, err := Open("/h", &Options{InMemory: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	ctx := context.Background()
	m := &Message{Topic: "t", Body: []byte("x"), UniqKey: "K"}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Put(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0)
}
