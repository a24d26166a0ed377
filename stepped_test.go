package mqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
)

// The stepped-mode tests (Options.Stepped) run a randomized script that
// keeps none of the rules of "Deterministic runs" in doc.go: push
// consumers with several handler goroutines, bursts of messages reaching
// several queues of one consumer in one step, several retry chains,
// delayed and timer messages falling due together, periodic transaction
// check-backs, an orderly consumer suspending on failures, Settle
// skipped at random. In stepped mode two runs must still agree on every
// event, in one global order.

const stepMaxReconsume = 2

// stepRun is one run of the stepped script.
type stepRun struct {
	t       *testing.T
	ctx     context.Context
	clk     *clock.Fake
	s       *Store
	rng     *rand.Rand
	stepped bool

	mu     sync.Mutex
	events []string // everything observable, in the order it happened
}

func (r *stepRun) logf(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// handler records each delivery and fails a message while its "fail"
// property is above its reconsume count (when fails is set).
func (r *stepRun) handler(name string, fails bool) Handler {
	return func(_ context.Context, ms []*MessageExt) ConsumeResult {
		res := ConsumeSuccess
		for _, m := range ms {
			r.logf("deliver %s batch=%d %s", name, len(ms), describe(m))
			if n, _ := strconv.Atoi(m.Properties["fail"]); fails && int(m.ReconsumeTimes) < n {
				res = ReconsumeLater
			}
		}
		return res
	}
}

// runSteppedScript runs steps random steps drawn from scriptSeed on an
// in-memory store with a fake clock, seed storeSeed and Stepped as
// given, and returns everything observed.
func runSteppedScript(t *testing.T, scriptSeed uint64, storeSeed int64, stepped bool, steps int) []string {
	clk := clock.NewFake(t0)
	s, err := Open("stepped", smallFiles(&Options{InMemory: true, Clock: clk, Seed: storeSeed, Stepped: stepped,
		TxCheckInterval: 20 * time.Second, TxTimeout: 5 * time.Second, DefaultTopicQueues: 4}))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	r := &stepRun{t: t, ctx: context.Background(), clk: clk, s: s, stepped: stepped,
		rng: rand.New(rand.NewPCG(scriptSeed, 43))}
	for _, tc := range []struct {
		name   string
		queues int
	}{{"orders", 4}, {"seq", 2}, {"later", 2}, {"tx", 3}} {
		require.NoError(t, s.CreateTopic(tc.name, TopicConfig{Queues: tc.queues}))
	}
	// gp: two members of 8 goroutines each, failing messages as told; gs:
	// one member of 4 goroutines and batches of 3, never failing; go: an
	// orderly consumer of "seq", failing as told; gl: a pull consumer of
	// the delayed and transactional topics.
	push := []struct {
		group, name, topic string
		o                  ConsumerOptions
	}{
		{"gp", "gp-1", "orders", ConsumerOptions{Goroutines: 8}},
		{"gp", "gp-2", "orders", ConsumerOptions{Goroutines: 8}},
		{"gs", "gs-1", "orders", ConsumerOptions{Goroutines: 4, ConsumeBatchSize: 3}},
		{"go", "go-1", "seq", ConsumerOptions{Goroutines: 4, Orderly: true}},
	}
	for _, c := range push {
		c.o.MaxReconsumeTimes, c.o.ConsumeFromWhere = stepMaxReconsume, ConsumeFromFirstOffset
		pc, err := s.NewPushConsumer(c.group, c.o)
		require.NoError(t, err)
		defer pc.Close()
		require.NoError(t, pc.Subscribe(c.topic, nil))
		require.NoError(t, pc.Start(r.handler(c.name, c.group != "gs")))
	}
	pull, err := s.NewPullConsumer("gl", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer pull.Close()
	require.NoError(t, pull.Subscribe("later", nil))
	require.NoError(t, pull.Subscribe("tx", nil))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState {
		r.logf("check-back %s", m.UniqKey)
		if m.Properties["check"] == "commit" {
			return CommitMessage
		}
		return RollbackMessage
	}, TransactionOptions{})
	require.NoError(t, err)
	r.settle()
	for i := range steps {
		r.step(i, p, tp, pull)
		if r.rng.IntN(3) != 0 {
			r.settle()
		}
	}
	// Let every retry chain, suspended queue, delayed message and
	// transaction finish.
	for range 30 {
		clk.Advance(time.Minute)
		r.settle()
		r.poll(pull)
	}
	return r.finish()
}

func (r *stepRun) settle() {
	r.t.Helper()
	require.NoError(r.t, r.s.Settle(r.ctx))
	r.logf("settled at %d", r.clk.Now().UnixMilli())
}

// step runs one random step of the script.
func (r *stepRun) step(i int, p *Producer, tp *TransactionProducer, pull *PullConsumer) {
	t := r.t
	body := func() []byte { return fmt.Appendf(nil, "m%d-%d", i, r.rng.IntN(1000)) }
	fail := func() map[string]string {
		if r.rng.IntN(2) == 0 {
			return nil
		}
		return map[string]string{"fail": strconv.Itoa(1 + r.rng.IntN(stepMaxReconsume+1))}
	}
	switch k := r.rng.IntN(20); {
	case k < 5: // a burst to the push groups: several queues, some failing
		for range 1 + r.rng.IntN(6) {
			res, err := p.Send(r.ctx, &Message{Topic: "orders", Body: body(), Properties: fail()})
			require.NoError(t, err)
			r.logf("send %s", sendResult(res))
		}
	case k < 7: // a batch (one queue)
		var msgs []*Message
		for range 1 + r.rng.IntN(5) {
			msgs = append(msgs, &Message{Topic: "orders", Body: body(), Properties: fail()})
		}
		rs, err := p.SendBatch(r.ctx, msgs)
		require.NoError(t, err)
		for _, res := range rs {
			r.logf("batch %s", sendResult(res))
		}
	case k < 9: // orderly messages on four shards
		for range 1 + r.rng.IntN(3) {
			m := &Message{Topic: "seq", Body: body(), ShardingKey: "k" + strconv.Itoa(r.rng.IntN(4)), Properties: fail()}
			res, err := p.Send(r.ctx, m)
			require.NoError(t, err)
			r.logf("orderly %s", sendResult(res))
		}
	case k < 11: // delayed messages, several falling due together
		for range 1 + r.rng.IntN(3) {
			m := &Message{Topic: "later", Body: body(), DelayLevel: 1 + r.rng.IntN(4)}
			if r.rng.IntN(2) == 0 { // the timer service instead of a delay level
				m.DelayLevel, m.DeliverAt = 0, r.clk.Now().Add(time.Duration(1+r.rng.IntN(20))*time.Second)
			}
			res, err := p.Send(r.ctx, m)
			require.NoError(t, err)
			r.logf("delayed level=%d at=%d %s", m.DelayLevel, m.DeliverAt.UnixMilli(), sendResult(res))
		}
	case k < 13: // a transaction: commit, rollback, or left to the check-back
		state := []TxState{CommitMessage, RollbackMessage, TxUnknown}[r.rng.IntN(3)]
		m := &Message{Topic: "tx", Body: body(), Properties: map[string]string{"check": []string{"commit", "rollback"}[r.rng.IntN(2)]}}
		res, err := tp.SendInTransaction(r.ctx, m, func(context.Context, *Message) TxState { return state })
		require.NoError(t, err)
		r.logf("tx %v %s", state, sendResult(res))
	case k < 14:
		require.NoError(t, r.s.CheckTransactions(r.ctx))
		r.logf("checked pending=%d", r.s.PendingTransactions())
	case k < 16:
		r.poll(pull)
	default: // time passes
		d := []time.Duration{time.Millisecond, time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}[r.rng.IntN(5)]
		r.clk.Advance(d)
		r.logf("advance %s to %d", d, r.clk.Now().UnixMilli())
	}
}

// poll takes everything the pull consumer has fetched and commits it.
func (r *stepRun) poll(pull *PullConsumer) {
	for {
		ms, err := pull.TryPoll(1 + r.rng.IntN(3))
		require.NoError(r.t, err)
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			r.logf("poll %s", describe(m))
		}
	}
	require.NoError(r.t, pull.Commit())
}

// finish appends the dead letters, the committed offsets and the
// deterministic part of Stats to the events.
func (r *stepRun) finish() []string {
	t := r.t
	for _, g := range []string{"gp", "gs", "go", "gl"} {
		dead, err := r.s.DeadLetters(g, 0, 1000)
		require.NoError(t, err)
		for _, m := range dead {
			r.logf("dead %s %s", g, describe(m))
		}
		offs, err := r.s.ConsumerOffsets(g)
		require.NoError(t, err)
		r.logf("offsets %s %+v", g, offs)
	}
	for _, e := range statsEvents(t, r.s) {
		r.logf("%s", e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestSteppedDeterministicRuns: in stepped mode the script, which breaks
// every rule Seed alone needs, gives the same events in the same global
// order twice; another script seed or store seed gives another history.
func TestSteppedDeterministicRuns(t *testing.T) {
	const steps = 120
	var all []string
	for _, scriptSeed := range []uint64{1, 2} {
		a := runSteppedScript(t, scriptSeed, 42, true, steps)
		b := runSteppedScript(t, scriptSeed, 42, true, steps)
		require.Equal(t, a, b, "script %d: stepped runs with the same seeds differ", scriptSeed)
		require.Greater(t, len(a), steps)
		c := runSteppedScript(t, scriptSeed, 43, true, steps)
		require.NotEqual(t, a, c, "script %d: another store seed, the same history", scriptSeed)
		all = append(all, a...)
	}
	d := runSteppedScript(t, 3, 42, true, steps)
	require.NotEqual(t, all[:len(d)/2], d[:len(d)/2], "another script seed, the same history")
	all = append(all, d...)
	// The scripts exercised every path they compare, and bursts reached
	// several queues of a consumer in one step.
	for _, want := range []string{"send ", "batch ", "orderly ", "delayed level=0 ", "tx COMMIT", "tx ROLLBACK", "tx UNKNOW ",
		"check-back ", "checked ", "poll later/", "poll tx/", "deliver gp-1", "deliver gp-2", "deliver gs-1 batch=3", "deliver go-1",
		"%RETRY%gp", "dead gp ", "dead go ", " rc=1 ", " rc=2 "} {
		require.True(t, slices.ContainsFunc(all, func(l string) bool { return strings.Contains(l, want) }),
			"the scripts never produced %q", want)
	}
}

// TestSteppedScriptUnstepped runs the same script without Stepped: it
// must run to its end, but its history may differ from run to run (the
// Go scheduler orders the background work), so nothing compares two runs.
// Every message sent is accounted for: delivered to gs, which never fails.
func TestSteppedScriptUnstepped(t *testing.T) {
	ev := runSteppedScript(t, 1, 42, false, 60)
	sent, got := map[string]bool{}, map[string]bool{}
	for _, l := range ev {
		f := strings.Fields(l)
		switch {
		case f[0] == "send" || f[0] == "batch":
			sent[fieldValue(f, "uniq=")] = true
		case f[0] == "deliver" && f[1] == "gs-1":
			got[fieldValue(f, "uniq=")] = true
		}
	}
	require.NotEmpty(t, sent)
	require.Equal(t, sent, got, "gs did not get every message sent to orders exactly")
}

// fieldValue is the value of the field starting with prefix.
func fieldValue(f []string, prefix string) string {
	for _, s := range f {
		if v, ok := strings.CutPrefix(s, prefix); ok {
			return v
		}
	}
	return ""
}

// TestSteppedNeedsFakeClock: Stepped without a fake clock is refused
// with ErrInvalidArgument, and nothing is created.
func TestSteppedNeedsFakeClock(t *testing.T) {
	dir := t.TempDir() + "/store"
	for _, clk := range []clock.Clock{nil, clock.Real} {
		_, err := Open(dir, &Options{Stepped: true, Clock: clk})
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Contains(t, err.Error(), "Stepped")
		require.NoDirExists(t, dir)
	}
}

// TestSteppedCloseDuringSettle: a Close while a stepped Settle runs a
// handler that waits for its ctx cancels that ctx, and Settle returns
// ErrClosed instead of touching the closed store.
func TestSteppedCloseDuringSettle(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s, err := Open("stepped", smallFiles(&Options{InMemory: true, Clock: clk, Stepped: true}))
	require.NoError(t, err)
	pc, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("t", nil))
	entered := make(chan struct{})
	require.NoError(t, pc.Start(func(hctx context.Context, _ []*MessageExt) ConsumeResult {
		close(entered)
		<-hctx.Done()
		return ReconsumeLater
	}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	require.NoError(t, err)
	settled := make(chan error, 1)
	go func() { settled <- s.Settle(ctx) }()
	<-entered
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-settled, ErrClosed)
}

// TestSteppedConsumersWaitForSettle: in stepped mode nothing is fetched
// or handled between Settles, and one Settle delivers everything sent to
// several queues, in queue order, then offset order, on its own goroutine.
func TestSteppedConsumersWaitForSettle(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s, err := Open("stepped", smallFiles(&Options{InMemory: true, Clock: clk, Stepped: true, Seed: 1}))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 3}))
	pc, err := s.NewPushConsumer("g", ConsumerOptions{Goroutines: 16, ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", nil))
	var got []string // written by the handler on Settle's goroutine only
	require.NoError(t, pc.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		for _, m := range ms {
			got = append(got, fmt.Sprintf("%d@%d", m.QueueID, m.QueueOffset))
		}
		return ConsumeSuccess
	}))
	for i := range 9 {
		_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte{byte(i)}}, i%3)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(ctx))
	require.Empty(t, got, "a stepped consumer handled messages before Settle")
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, []string{"0@0", "0@1", "0@2", "1@0", "1@1", "1@2", "2@0", "2@1", "2@2"}, got)
}

// TestSteppedDelaysInFixedOrder: messages of two delay levels and the
// timer service falling due at the same instant are written by one
// Settle in a fixed order: the levels ascending, then the timers.
func TestSteppedDelaysInFixedOrder(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s, err := Open("stepped", smallFiles(&Options{InMemory: true, Clock: clk, Stepped: true, Seed: 1,
		DelayLevels: []time.Duration{time.Second, 5 * time.Second}}))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 1}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	send := func(body string, level int, at time.Time) {
		_, err := p.Send(ctx, &Message{Topic: "d", Body: []byte(body), DelayLevel: level, DeliverAt: at})
		require.NoError(t, err)
	}
	due := clk.Now().Add(5 * time.Second)
	send("timer", 0, due)
	send("level2", 2, time.Time{})
	require.NoError(t, s.Settle(ctx))
	clk.Advance(4 * time.Second)
	send("level1", 1, time.Time{})
	require.NoError(t, s.Settle(ctx))
	n, err := s.MaxOffset("d", 0)
	require.NoError(t, err)
	require.Zero(t, n, "delivered before due")
	clk.Advance(time.Second)
	require.NoError(t, s.Settle(ctx))
	ms, err := s.ReadQueue(ctx, "d", 0, 0, 10)
	require.NoError(t, err)
	var got []string
	for _, m := range ms {
		got = append(got, string(m.Body))
	}
	require.Equal(t, []string{"level1", "level2", "timer"}, got)
}

// TestSteppedRequestReply: in stepped mode a request is answered by the
// Settle that runs its replier, not before; a request whose timeout
// passes on the clock before a Settle ends with ErrRequestTimeout, and
// the reply that Settle then stores is counted late.
func TestSteppedRequestReply(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s, err := Open("stepped", smallFiles(&Options{InMemory: true, Clock: clk, Stepped: true, Seed: 1}))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.NoError(t, s.CreateTopic("req", TopicConfig{Queues: 2}))
	p, err := s.NewProducer(ProducerOptions{RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	c, err := s.NewPushConsumer("replier", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("req", nil))
	var handled int // written on Settle's goroutine only
	require.NoError(t, c.Start(func(ctx context.Context, ms []*MessageExt) ConsumeResult {
		for _, m := range ms {
			handled++
			echo(t, s)(ctx, m)
		}
		return ConsumeSuccess
	}))
	type answer struct {
		m   *MessageExt
		err error
	}
	request := func(body string) <-chan answer {
		ch := make(chan answer, 1)
		require.NoError(t, p.RequestAsync(ctx, &Message{Topic: "req", Body: []byte(body)},
			func(m *MessageExt, err error) { ch <- answer{m, err} }))
		return ch
	}

	first := request("one")
	require.Equal(t, 1, requestStats(t, s).Pending)
	require.Zero(t, handled, "the replier ran before Settle")
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, 1, handled)
	a := <-first
	require.NoError(t, a.err)
	require.Equal(t, "re:one", string(a.m.Body))

	second := request("two")
	clk.Advance(5 * time.Second) // the request's timer fires on the clock
	a = <-second
	require.ErrorIs(t, a.err, ErrRequestTimeout)
	require.Nil(t, a.m)
	require.NoError(t, s.Settle(ctx)) // the replier answers too late
	require.Equal(t, 2, handled)
	require.Equal(t, RequestStats{Replies: 1, LateReplies: 1}, requestStats(t, s))
}
