package mqlite

// Model-based random testing (reliability plan S31). A sequence of
// operations drawn from a seed (puts, batches, transactions that commit or
// roll back, queue reads, lookups by ID and key, a pull consumer's polls
// and commits, clock ticks, clean restarts and power-loss images) runs
// against the store and against an in-memory model of what it must hold.
// Every sequence runs under four configurations (FlushSync and FlushAsync,
// segments of 16 KiB and 1 MiB); the observable history is checked against
// the model at every step, so the configurations must agree with each
// other as well. A failure names the configuration, the seed and the step:
//
//	go test -run 'TestModel$' -model.seed=N -model.seqs=1 .

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/vfs"
)

var (
	modelSeqs = flag.Int("model.seqs", 12, "random sequences per configuration run by TestModel")
	modelOps  = flag.Int("model.ops", 150, "operations per sequence in TestModel")
	modelSeed = flag.Uint64("model.seed", 0, "seed of TestModel's first sequence (0: time-based)")
)

type modelConfig struct {
	name  string
	flush FlushMode
	seg   int64
}

var modelConfigs = []modelConfig{
	{"sync/16KiB", FlushSync, 16 << 10},
	{"sync/1MiB", FlushSync, 1 << 20},
	{"async/16KiB", FlushAsync, 16 << 10},
	{"async/1MiB", FlushAsync, 1 << 20},
}

// modelTopics are created at the start; the pull consumer reads the first.
var modelTopics = []struct {
	name   string
	queues int
}{{"ta", 2}, {"tb", 3}}

// modelMsg is what the model knows of a stored message.
type modelMsg struct {
	body []byte
	tags string
	key  string
	id   string // "" for a committed transactional message
}

// modelRun is one sequence under one configuration.
type modelRun struct {
	t    *testing.T
	ctx  context.Context
	rng  *rand.Rand
	cfg  modelConfig
	step string // names the configuration, seed and step in failures
	clk  *clock.Fake
	ffs  *vfs.Faulty
	s    *Store
	pc   *PullConsumer
	tp   *TransactionProducer
	txq  int // the queue the transaction selector picks

	q    map[string][][]modelMsg // topic -> queue -> messages by offset
	keys int

	// The consumer of modelTopics[0], per queue: the next offset it must
	// deliver, and what it committed, exactly if exact (a Commit since
	// the last crash), else an upper bound. After a crash the persisted
	// offset is anywhere up to the committed one (clamped to the queue's
	// end), so the next delivery may start anywhere up to resync[q] (-1:
	// it must start at delivered[q]).
	delivered, committed, resync []int64
	exact                        []bool

	crashRng *rand.Rand // for crash images, whose size depends on timing
}

func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("first seed %d (rerun one sequence with -model.seed=N -model.seqs=1)", seed)
	for _, cfg := range modelConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			for i := range uint64(*modelSeqs) {
				runModel(t, cfg, seed+i, *modelOps)
			}
		})
	}
}

func runModel(t *testing.T, cfg modelConfig, seed uint64, ops int) {
	r := &modelRun{t: t, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 31)), crashRng: rand.New(rand.NewPCG(seed, 32)), cfg: cfg,
		clk: clock.NewFake(time.Unix(1_700_000_000, 0)), ffs: vfs.NewFaulty(vfs.NewMem()), q: map[string][][]modelMsg{}}
	r.step = fmt.Sprintf("%s seed %d: open", cfg.name, seed)
	r.open(true)
	for _, tp := range modelTopics {
		require.NoError(t, r.s.CreateTopic(tp.name, TopicConfig{Queues: tp.queues}), r.step)
		r.q[tp.name] = make([][]modelMsg, tp.queues)
	}
	n := modelTopics[0].queues
	r.delivered, r.committed, r.resync, r.exact = make([]int64, n), make([]int64, n), slices.Repeat([]int64{-1}, n), slices.Repeat([]bool{true}, n)
	r.startConsumer()
	var hist []string
	for i := range ops {
		x := r.rng.IntN(100)
		name := modelOpName(x)
		hist = append(hist, name)
		r.step = fmt.Sprintf("%s seed %d step %d (%s; before: %v)", cfg.name, seed, i, name, hist[max(0, len(hist)-16):len(hist)-1])
		switch {
		case x < 30:
			r.put()
		case x < 38:
			r.batch()
		case x < 43:
			r.txn()
		case x < 58:
			r.read()
		case x < 63:
			r.lookup()
		case x < 78:
			r.poll()
		case x < 83:
			r.commit()
		case x < 88:
			r.clk.Advance(600 * time.Millisecond) // flushes, checkpoints, offset writes, check-backs
		case x < 94:
			r.restart()
		default:
			r.crash()
		}
	}
	r.step = fmt.Sprintf("%s seed %d: final check", cfg.name, seed)
	r.checkAll()
	r.close()
}

// modelOpName names runModel's operation x.
func modelOpName(x int) string {
	for _, o := range []struct {
		below int
		name  string
	}{{30, "put"}, {38, "batch"}, {43, "txn"}, {58, "read"}, {63, "lookup"}, {78, "poll"}, {83, "commit"}, {88, "tick"}, {94, "restart"}} {
		if x < o.below {
			return o.name
		}
	}
	return "crash"
}

func (r *modelRun) open(first bool) {
	opts := &Options{Flush: r.cfg.flush, SegmentSize: r.cfg.seg, SyncFlushTimeout: time.Minute, FlowControlThreshold: -1,
		NoWarm: true, Clock: r.clk, ConsumeQueueEntries: 1024, IndexSlots: 512, IndexEntries: 2048}
	s, err := openFS(r.ffs, modelDir, opts)
	require.NoError(r.t, err, r.step)
	r.s = s
	if !first {
		rep, err := s.Verify(r.ctx, nil)
		require.NoError(r.t, err, r.step)
		require.True(r.t, rep.OK, "%s: %v", r.step, rep.Problems)
	}
	r.tp, err = s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return RollbackMessage },
		TransactionOptions{Selector: func(*Message, int) int { return r.txq }})
	require.NoError(r.t, err, r.step)
}

const modelDir = "/store"

func (r *modelRun) startConsumer() {
	pc, err := r.s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(r.t, err, r.step)
	queues := make([]int, modelTopics[0].queues)
	for i := range queues {
		queues[i] = i
	}
	require.NoError(r.t, pc.Assign(modelTopics[0].name, nil, queues...), r.step)
	r.pc = pc
}

func (r *modelRun) close() {
	require.NoError(r.t, r.pc.Close(), r.step)
	require.NoError(r.t, r.tp.Close(), r.step)
	require.NoError(r.t, r.s.Close(), r.step)
}

// pick returns a random topic and queue.
func (r *modelRun) pick() (string, int) {
	tp := modelTopics[r.rng.IntN(len(modelTopics))]
	return tp.name, r.rng.IntN(tp.queues)
}

// message returns a message for topic with a random body, tag and
// (unique) key; bodies stay small beside the segment so that a batch fits.
func (r *modelRun) message(topic string) (*Message, modelMsg) {
	body := make([]byte, 1+r.rng.IntN(int(min(2000, r.cfg.seg/16))))
	for i := range body {
		body[i] = byte(r.rng.Uint32())
	}
	m := &Message{Topic: topic, Body: body, Tags: []string{"", "x", "y"}[r.rng.IntN(3)]}
	mm := modelMsg{body: body, tags: m.Tags}
	if r.rng.IntN(3) == 0 {
		r.keys++
		mm.key = fmt.Sprintf("k%d", r.keys)
		m.Keys = []string{mm.key}
	}
	return m, mm
}

func (r *modelRun) put() {
	topic, q := r.pick()
	m, mm := r.message(topic)
	res, err := r.s.Put(r.ctx, m, q)
	require.NoError(r.t, err, r.step)
	require.Equal(r.t, int64(len(r.q[topic][q])), res.QueueOffset, "%s: queue offset of a put", r.step)
	mm.id = res.MsgID()
	r.q[topic][q] = append(r.q[topic][q], mm)
}

func (r *modelRun) batch() {
	topic, q := r.pick()
	msgs := make([]*Message, 1+r.rng.IntN(6))
	mms := make([]modelMsg, len(msgs))
	for i := range msgs {
		msgs[i], mms[i] = r.message(topic)
	}
	rs, err := r.s.PutBatch(r.ctx, msgs, q)
	require.NoError(r.t, err, r.step)
	require.Len(r.t, rs, len(msgs), r.step)
	for i, res := range rs {
		require.Equal(r.t, int64(len(r.q[topic][q])), res.QueueOffset, "%s: queue offset in a batch", r.step)
		mms[i].id = res.MsgID()
		r.q[topic][q] = append(r.q[topic][q], mms[i])
	}
}

// txn sends a transactional message whose local transaction commits (the
// message then follows everything stored before the commit) or rolls
// back (it never shows).
func (r *modelRun) txn() {
	topic, q := r.pick()
	r.txq = q
	m, mm := r.message(topic)
	state := []TxState{CommitMessage, RollbackMessage}[r.rng.IntN(2)]
	_, err := r.tp.SendInTransaction(r.ctx, m, func(context.Context, *Message) TxState { return state })
	require.NoError(r.t, err, r.step)
	if state == CommitMessage {
		r.q[topic][q] = append(r.q[topic][q], mm)
	}
}

// read checks a random range of a random queue.
func (r *modelRun) read() {
	topic, q := r.pick()
	want := r.q[topic][q]
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	maxOff, err := r.s.MaxOffset(topic, q)
	require.NoError(r.t, err, r.step)
	require.Equal(r.t, int64(len(want)), maxOff, "%s: max offset of %s/%d", r.step, topic, q)
	if len(want) == 0 {
		return
	}
	from := r.rng.Int64N(int64(len(want)))
	got, err := r.s.ReadQueue(r.ctx, topic, q, from, 1+r.rng.IntN(20))
	require.NoError(r.t, err, r.step)
	require.NotEmpty(r.t, got, r.step)
	for i, m := range got {
		r.same(want, from+int64(i), m)
	}
}

// same checks m against the model's message at offset off of queue want.
func (r *modelRun) same(want []modelMsg, off int64, m *MessageExt) {
	require.Equal(r.t, off, m.QueueOffset, "%s: queue offset", r.step)
	require.Less(r.t, off, int64(len(want)), "%s: a message past the model's end", r.step)
	w := want[off]
	require.True(r.t, bytes.Equal(w.body, m.Body), "%s: body of %s/%d@%d", r.step, m.Topic, m.QueueID, off)
	require.Equal(r.t, w.tags, m.Tags, "%s: tags at %d", r.step, off)
	if w.key != "" {
		require.Equal(r.t, []string{w.key}, m.Keys, "%s: keys at %d", r.step, off)
	} else {
		require.Empty(r.t, m.Keys, "%s: keys at %d", r.step, off)
	}
	if w.id != "" {
		require.Equal(r.t, w.id, m.MsgID, "%s: message ID at %d", r.step, off)
	}
}

// lookup finds a random message by its ID and, when it has one, its key.
func (r *modelRun) lookup() {
	topic, q := r.pick()
	want := r.q[topic][q]
	if len(want) == 0 {
		return
	}
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	off := r.rng.IntN(len(want))
	w := want[off]
	if w.id != "" {
		m, err := r.s.MessageByID(w.id)
		require.NoError(r.t, err, r.step)
		r.same(want, int64(off), m)
	}
	if w.key != "" {
		ms, err := r.s.MessagesByKey(topic, w.key, time.Time{}, r.clk.Now().Add(time.Hour), 10)
		require.NoError(r.t, err, r.step)
		require.Len(r.t, ms, 1, "%s: messages with key %s", r.step, w.key)
		r.same(want, int64(off), ms[0])
	}
}

// poll takes the consumer's next messages, if the model says there are any.
func (r *modelRun) poll() {
	max := 1 + r.rng.IntN(10) // drawn first: the sequence must not depend on what is pending
	topic := modelTopics[0].name
	pending := false
	for q, p := range r.delivered {
		pending = pending || r.resync[q] >= 0 && int64(len(r.q[topic][q])) > r.resync[q] || r.resync[q] < 0 && int64(len(r.q[topic][q])) > p
	}
	if !pending {
		return // Poll would wait for a message that is not coming
	}
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second) // a watchdog, never reached when correct
	defer cancel()
	got, err := r.pc.Poll(ctx, max)
	require.NoError(r.t, err, "%s: poll (a queue skipped past its messages?)", r.step)
	for _, m := range got {
		q := m.QueueID
		require.Equal(r.t, topic, m.Topic, r.step)
		if r.resync[q] >= 0 {
			require.LessOrEqual(r.t, m.QueueOffset, r.resync[q], "%s: after a crash queue %d resumed past its committed offset", r.step, q)
			r.delivered[q], r.resync[q] = m.QueueOffset, -1
		}
		r.same(r.q[topic][q], r.delivered[q], m)
		r.delivered[q]++
	}
}

func (r *modelRun) commit() {
	require.NoError(r.t, r.pc.Commit(), r.step)
	for q, p := range r.delivered {
		if r.resync[q] < 0 {
			r.committed[q], r.exact[q] = p, true
		}
	}
}

// restart closes and reopens the store: nothing changes.
func (r *modelRun) restart() {
	r.close()
	r.open(false)
	require.True(r.t, r.s.Recovery().CleanShutdown, r.step)
	r.checkLengths(false)
	r.startConsumer()
	topic := modelTopics[0].name
	for q := range r.delivered {
		if r.exact[q] {
			r.delivered[q], r.resync[q] = r.committed[q], -1 // offsets are written on Close
		} else {
			r.resync[q] = min(r.committed[q], int64(len(r.q[topic][q])))
		}
	}
}

// crash opens the store on a power-loss image taken now. With FlushSync
// every queue is intact; with FlushAsync each keeps a prefix of itself,
// which the model keeps too.
func (r *modelRun) crash() {
	img := r.ffs.Crash(r.crashRng, r.rng.Float64())
	r.close()
	r.ffs = vfs.NewFaulty(img)
	r.clk = clock.NewFake(r.clk.Now().Add(time.Hour))
	r.open(false)
	require.False(r.t, r.s.Recovery().CleanShutdown, r.step)
	r.checkLengths(r.cfg.flush == FlushAsync)
	r.startConsumer()
	topic := modelTopics[0].name
	for q := range r.delivered {
		r.committed[q] = min(r.committed[q], int64(len(r.q[topic][q])))
		r.resync[q], r.exact[q] = r.committed[q], false
	}
}

// checkLengths compares every queue's length with the model's; with
// prefix, a shorter queue is allowed and the model is cut to it.
func (r *modelRun) checkLengths(prefix bool) {
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	for _, tp := range modelTopics {
		for q := range tp.queues {
			n, err := r.s.MaxOffset(tp.name, q)
			require.NoError(r.t, err, r.step)
			want := int64(len(r.q[tp.name][q]))
			if prefix && n < want {
				r.q[tp.name][q] = r.q[tp.name][q][:n]
				want = n
			}
			require.Equal(r.t, want, n, "%s: length of %s/%d", r.step, tp.name, q)
		}
	}
	if prefix {
		r.checkAll() // what is left must be a prefix, byte for byte
	}
}

// checkAll reads every queue from the start and compares it with the model.
func (r *modelRun) checkAll() {
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	for _, tp := range modelTopics {
		for q := range tp.queues {
			want := r.q[tp.name][q]
			for from := int64(0); from < int64(len(want)); {
				got, err := r.s.ReadQueue(r.ctx, tp.name, q, from, 64)
				require.NoError(r.t, err, r.step)
				require.NotEmpty(r.t, got, r.step)
				for _, m := range got {
					r.same(want, from, m)
					from++
				}
			}
		}
	}
}
