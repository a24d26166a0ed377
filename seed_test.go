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
	"github.com/mqlite/mqlite/vfs"
)

// The determinism tests (Options.Seed) run one randomized script twice
// and compare everything observable. The script keeps to the rules of
// "Deterministic runs" in doc.go: one handler goroutine per push
// consumer, a Settle after every step, at most one message at a time on
// its way through the background services (a retry chain or a delayed
// message), messages for a failing push group sent to one queue per step,
// and transaction check-backs run by CheckTransactions only.

const detMaxReconsume = 2 // the failing group's MaxReconsumeTimes

// detRun is one run of the script: its history, one line per event.
type detRun struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Fake
	s   *Store
	rng *rand.Rand

	mu        sync.Mutex
	delivered map[string][]string // consumer -> its deliveries, in order
	chains    int                 // failing messages whose retries are not over (handlers update it)

	history        []string // the script's own events, in order
	delayedPending int      // delayed messages not polled yet
	uniqs          []string // unique keys of the script's sends
}

func (r *detRun) logf(format string, args ...any) {
	r.history = append(r.history, fmt.Sprintf(format, args...))
}

// describe is everything observable about a delivered message.
func describe(m *MessageExt) string {
	return fmt.Sprintf("%s/%d@%d id=%s uniq=%s rc=%d store=%d born=%d body=%s retryOf=%s",
		m.Topic, m.QueueID, m.QueueOffset, m.MsgID, m.UniqKey, m.ReconsumeTimes,
		m.StoreTimestamp.UnixMilli(), m.BornTimestamp.UnixMilli(), m.Body, m.Properties[PropRetryTopic])
}

func sendResult(res SendResult) string {
	return fmt.Sprintf("%s/%d@%d id=%s uniq=%s off=%d size=%d store=%d delayed=%t tx=%s status=%s",
		res.Topic, res.QueueID, res.QueueOffset, res.MsgID(), res.UniqKey(), res.Offset, res.Size,
		res.StoreTime.UnixMilli(), res.Delayed, res.TransactionID, res.Status)
}

// handler records each delivery to consumer name; with fails set it
// fails a message as many times as its "fail" property says.
func (r *detRun) handler(name string, fails bool) Handler {
	return func(_ context.Context, ms []*MessageExt) ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		res := ConsumeSuccess
		for _, m := range ms {
			r.delivered[name] = append(r.delivered[name], describe(m))
			n, _ := strconv.Atoi(m.Properties["fail"])
			if !fails || int(m.ReconsumeTimes) >= n {
				if fails && n > 0 {
					r.chains-- // consumed at last
				}
				continue
			}
			res = ReconsumeLater
			if int(m.ReconsumeTimes) >= detMaxReconsume {
				r.chains-- // to the dead-letter queue
			}
		}
		return res
	}
}

func (r *detRun) quiet() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chains == 0 && r.delayedPending == 0
}

func (r *detRun) settle() {
	r.t.Helper()
	require.NoError(r.t, r.s.Settle(r.ctx))
}

// runDeterminismScript runs steps random steps drawn from scriptSeed on a
// store opened with storeSeed and returns the whole history and the
// unique keys of the messages the script sent.
func runDeterminismScript(t *testing.T, scriptSeed uint64, storeSeed int64, steps int) ([]string, []string) {
	clk := clock.NewFake(t0)
	s, err := Open("det", smallFiles(&Options{InMemory: true, Clock: clk, Seed: storeSeed,
		TxCheckInterval: 1000 * time.Hour, DefaultTopicQueues: 4}))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	r := &detRun{t: t, ctx: context.Background(), clk: clk, s: s,
		rng: rand.New(rand.NewPCG(scriptSeed, 41)), delivered: map[string][]string{}}
	for _, tc := range []struct {
		name   string
		queues int
	}{{"orders", 4}, {"later", 2}, {"tx", 3}} {
		require.NoError(t, s.CreateTopic(tc.name, TopicConfig{Queues: tc.queues}))
	}
	// Group gp: two members, failing messages as told; gs: one member,
	// never failing; gl: a pull consumer of the delayed and
	// transactional topics.
	for _, c := range []struct{ group, name string }{{"gp", "gp-1"}, {"gp", "gp-2"}, {"gs", "gs-1"}} {
		pc, err := s.NewPushConsumer(c.group, ConsumerOptions{Goroutines: 1, MaxReconsumeTimes: detMaxReconsume,
			ConsumeFromWhere: ConsumeFromFirstOffset})
		require.NoError(t, err)
		defer pc.Close()
		require.NoError(t, pc.Subscribe("orders", nil))
		require.NoError(t, pc.Start(r.handler(c.name, c.group == "gp")))
	}
	pull, err := s.NewPullConsumer("gl", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer pull.Close()
	require.NoError(t, pull.Subscribe("later", nil))
	require.NoError(t, pull.Subscribe("tx", nil))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState {
		if m.Properties["check"] == "commit" {
			return CommitMessage
		}
		return RollbackMessage
	}, TransactionOptions{})
	require.NoError(t, err)
	r.settle()

	for i := range steps {
		r.step(i, p, tp, pull)
		r.settle()
	}
	// Let every retry chain and delayed message finish.
	for range 20 {
		clk.Advance(time.Minute)
		r.settle()
		r.poll(pull)
	}
	require.True(t, r.quiet(), "the script leaves nothing in flight")
	return r.finish(), r.uniqs
}

// step runs one random step of the script.
func (r *detRun) step(i int, p *Producer, tp *TransactionProducer, pull *PullConsumer) {
	t := r.t
	body := func() []byte { return []byte(fmt.Sprintf("m%d-%d", i, r.rng.IntN(1000))) }
	background := r.quiet() // nothing in flight: this step may start something
	switch k := r.rng.IntN(20); {
	case k < 5: // one message to the push groups, perhaps failing
		m := &Message{Topic: "orders", Body: body()}
		if r.rng.IntN(2) == 0 {
			m.ShardingKey = strconv.Itoa(r.rng.IntN(5))
		}
		if background {
			m.Properties = map[string]string{"fail": strconv.Itoa(1 + r.rng.IntN(detMaxReconsume+1))}
			r.mu.Lock()
			r.chains++
			r.mu.Unlock()
		}
		res, err := p.Send(r.ctx, m)
		require.NoError(t, err)
		r.uniqs = append(r.uniqs, res.UniqKey())
		r.logf("send %s", sendResult(res))
	case k < 7: // a batch (one queue), never failing
		var msgs []*Message
		for range 1 + r.rng.IntN(4) {
			msgs = append(msgs, &Message{Topic: "orders", Body: body()})
		}
		rs, err := p.SendBatch(r.ctx, msgs)
		require.NoError(t, err)
		for _, res := range rs {
			r.uniqs = append(r.uniqs, res.UniqKey())
			r.logf("batch %s", sendResult(res))
		}
	case k < 9 && background: // a delayed message for the pull consumer
		m := &Message{Topic: "later", Body: body(), DelayLevel: 1 + r.rng.IntN(4)}
		if r.rng.IntN(2) == 0 { // the timer service instead of a delay level
			m.DelayLevel, m.DeliverAt = 0, r.clk.Now().Add(time.Duration(1+r.rng.IntN(40_000))*time.Millisecond)
		}
		res, err := p.Send(r.ctx, m)
		require.NoError(t, err)
		r.delayedPending++
		r.uniqs = append(r.uniqs, res.UniqKey())
		r.logf("delayed level=%d at=%d %s", m.DelayLevel, m.DeliverAt.UnixMilli(), sendResult(res))
	case k < 11: // a transaction: commit, rollback, or left to the check-back
		state := []TxState{CommitMessage, RollbackMessage, TxUnknown}[r.rng.IntN(3)]
		m := &Message{Topic: "tx", Body: body(), Properties: map[string]string{"check": []string{"commit", "rollback"}[r.rng.IntN(2)]}}
		res, err := tp.SendInTransaction(r.ctx, m, func(context.Context, *Message) TxState { return state })
		require.NoError(t, err)
		r.uniqs = append(r.uniqs, res.UniqKey())
		r.logf("tx %v %s", state, sendResult(res))
	case k < 12: // the check-back round
		require.NoError(t, r.s.CheckTransactions(r.ctx))
		r.logf("checked pending=%d", r.s.PendingTransactions())
	case k < 14:
		r.poll(pull)
	default: // time passes
		d := []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}[r.rng.IntN(6)]
		r.clk.Advance(d)
		r.logf("advance %s to %d", d, r.clk.Now().UnixMilli())
	}
}

// poll takes everything the pull consumer has (after a Settle) and
// commits it.
func (r *detRun) poll(pull *PullConsumer) {
	r.settle()
	for {
		ms, err := pull.TryPoll(1 + r.rng.IntN(3))
		require.NoError(r.t, err)
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if m.Topic == "later" {
				r.delayedPending--
			}
			r.logf("poll %s", describe(m))
		}
	}
	require.NoError(r.t, pull.Commit())
}

// finish appends the deliveries per consumer, the dead letters and the
// deterministic part of Stats to the history.
func (r *detRun) finish() []string {
	t := r.t
	r.mu.Lock()
	names := make([]string, 0, len(r.delivered))
	for name := range r.delivered {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, d := range r.delivered[name] {
			r.logf("deliver %s %s", name, d)
		}
	}
	r.mu.Unlock()
	dead, err := r.s.DeadLetters("gp", 0, 1000)
	require.NoError(t, err)
	for _, m := range dead {
		r.logf("dead %s", describe(m))
	}
	for _, e := range statsEvents(t, r.s) {
		r.logf("%s", e)
	}
	return r.history
}

// statsEvents is the deterministic part of s's Stats, a line each: the
// CommitLog's end, each topic's messages and queues, each group's lag,
// the pending transactions.
func statsEvents(t *testing.T, s *Store) []string {
	st, err := s.Stats()
	require.NoError(t, err)
	out := []string{fmt.Sprintf("commitlog wrote=%d", st.CommitLog.WrotePosition)}
	for _, tp := range st.Topics {
		out = append(out, fmt.Sprintf("topic %s messages=%d queues=%v", tp.Name, tp.Messages, tp.Queues))
	}
	for _, g := range st.Groups {
		out = append(out, fmt.Sprintf("group %s lag=%d queues=%v", g.Name, g.Lag, g.Queues))
	}
	return append(out, fmt.Sprintf("pending transactions %d", st.PendingTransactions))
}

// TestDeterministicRuns: the same script on stores with the same seed
// gives the same history, event for event (IDs, unique keys, queues,
// offsets, store times, deliveries per consumer with their reconsume
// counts, dead letters, stats); with another store seed the generated
// unique keys differ.
func TestDeterministicRuns(t *testing.T) {
	const steps = 200
	var all []string
	for _, scriptSeed := range []uint64{1, 2, 3} {
		a, ua := runDeterminismScript(t, scriptSeed, 42, steps)
		b, _ := runDeterminismScript(t, scriptSeed, 42, steps)
		require.Equal(t, a, b, "script %d: same seeds, different histories", scriptSeed)
		require.Greater(t, len(a), steps/2)
		c, uc := runDeterminismScript(t, scriptSeed, 43, steps)
		require.NotEqual(t, a, c, "script %d: another store seed, the same history", scriptSeed)
		require.Len(t, uc, len(ua))
		for i := range ua {
			require.NotEqual(t, ua[i], uc[i], "script %d: unique key %d is the same under another seed", scriptSeed, i)
		}
		all = append(all, a...)
	}
	// Without a seed the store stays random, as before.
	_, u1 := runDeterminismScript(t, 1, 0, 20)
	_, u2 := runDeterminismScript(t, 1, 0, 20)
	require.NotEqual(t, u1, u2, "seed 0: two runs generated the same unique keys")
	// The scripts exercised every path they compare.
	for _, want := range []string{"send ", "batch ", "delayed level=0 ", " at=-", "tx COMMIT", "tx ROLLBACK", "tx UNKNOW ", "checked ", "poll ",
		"deliver gp-1", "deliver gp-2", "deliver gs-1", "dead ", " rc=1 ", " rc=2 "} {
		require.True(t, slices.ContainsFunc(all, func(l string) bool { return strings.Contains(l, want) }),
			"the scripts never produced %q", want)
	}
}

// TestSeedReopen: a store reopened with the same seed and the clock set
// back does not repeat the unique keys and transaction IDs of its previous
// run (the CommitLog's end is part of the seed), and the same two runs
// still give the same values.
func TestSeedReopen(t *testing.T) {
	ctx := context.Background()
	session := func(fs vfs.FS) []string {
		s, err := openFS(fs, "/d", smallFiles(&Options{Clock: clock.NewFake(t0), Seed: 7, TxCheckInterval: time.Hour}))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		p, err := s.NewProducer(ProducerOptions{})
		require.NoError(t, err)
		tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{})
		require.NoError(t, err)
		var keys []string
		for i := range 3 {
			res, err := p.Send(ctx, &Message{Topic: "t", Body: []byte{byte(i)}})
			require.NoError(t, err)
			keys = append(keys, res.UniqKey(), strconv.Itoa(res.QueueID))
		}
		res, err := tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("tx")},
			func(context.Context, *Message) TxState { return CommitMessage })
		require.NoError(t, err)
		return append(keys, res.TransactionID)
	}
	fsA, fsB := vfs.NewMem(), vfs.NewMem()
	a1, a2 := session(fsA), session(fsA)
	b1, b2 := session(fsB), session(fsB)
	require.Equal(t, a1, b1, "first runs")
	require.Equal(t, a2, b2, "runs after a reopen")
	for i := 0; i < len(a1); i += 2 { // unique keys and the transaction ID
		require.NotContains(t, a1, a2[i], "the reopened store repeated a key of its previous run")
	}
}
