package mqlite

// Model-based random testing (reliability plan S31). A sequence of
// operations drawn from a seed (puts, concurrent puts to every queue of a
// topic, batches, transactions that commit or roll back, delayed puts
// with a delay level or a deliver-at time, queue reads, lookups by ID and
// key, a pull consumer's polls and commits, a second group's polls that
// fail messages into its retry topic and dead-letter queue, clock ticks,
// retention passes, clean restarts and power-loss images) runs against
// the store and against an in-memory model of what it must hold. Delayed
// messages and retries are in model_delay_test.go and
// model_retry_test.go, the consumers' model in model_consumer_test.go. Every
// sequence runs under four configurations (FlushSync and FlushAsync,
// segments of 16 KiB and 1 MiB); the observable history is checked against
// the model at every step, so the configurations must agree with each
// other as well. A failure names the configuration, the seed and the step:
//
//	go test -run 'TestModel$' -model.seed=N -model.seqs=1 .

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

var (
	// 4 sequences of 4 configurations by default; CI runs 10 (.ci/run).
	modelSeqs = flag.Int("model.seqs", 4, "random sequences per configuration run by TestModel")
	modelOps  = flag.Int("model.ops", 150, "operations per sequence in TestModel")
	modelSeed = flag.Uint64("model.seed", 0, "seed of TestModel's first sequence (0: time-based)")
	modelLog  = flag.Bool("model.log", false, "print the store's warnings (to debug a failing seed)")
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

// modelTopics are created at the start and take the plain puts; the pull
// consumer reads the first, the retry group the second.
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

	props     map[string]string // exactly its properties (none: none)
	anyProps  bool              // a transactional message: properties not checked
	reconsume int32
	pend      *modelPending // a delivered pending message: what it was
	origin    *modelOrigin  // a retry or dead letter: whose
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
	gc   *modelConsumer // reads modelTopics[0]
	rc   *modelConsumer // the retry group: modelTopics[1] and its retry topic
	tp   *TransactionProducer
	txq  int // the queue the transaction selector picks

	q   map[string][][]modelMsg // topic -> queue -> messages by offset
	min map[string][]int64      // topic -> queue -> first offset retention left
	// mins is every min offset each queue has had, in order: a consumer
	// behind the min may have moved to any of them in the background.
	mins map[modelQueue][]int64
	keys int

	pending []*modelPending         // delayed messages and retries not yet due
	origins map[string]*modelOrigin // the retry group's messages by unique key

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
		clk: clock.NewFake(time.Unix(modelStart, 0)), ffs: vfs.NewFaulty(vfs.NewMem()),
		q: map[string][][]modelMsg{}, min: map[string][]int64{}, mins: map[modelQueue][]int64{}, origins: map[string]*modelOrigin{}}
	r.step = fmt.Sprintf("%s seed %d: open", cfg.name, seed)
	r.open(true)
	for _, tp := range r.topics() {
		if !isSysTopic(tp.name) {
			require.NoError(t, r.s.CreateTopic(tp.name, TopicConfig{Queues: tp.queues}), r.step)
		}
		r.q[tp.name] = make([][]modelMsg, tp.queues)
		r.min[tp.name] = make([]int64, tp.queues)
	}
	queues := make([]modelQueue, modelTopics[0].queues)
	for q := range queues {
		queues[q] = modelQueue{modelTopics[0].name, q}
	}
	r.gc = newModelConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset}, queues)
	r.rc = newRetryConsumer()
	r.startConsumers()
	var hist []string
	for i := range ops {
		x := r.rng.IntN(100)
		name := modelOpName(x)
		hist = append(hist, name)
		r.step = fmt.Sprintf("%s seed %d step %d (%s; before: %v)", cfg.name, seed, i, name, hist[max(0, len(hist)-16):len(hist)-1])
		switch name {
		case "put":
			r.put()
		case "concurrent":
			r.concurrent()
		case "batch":
			r.batch()
		case "txn":
			r.txn()
		case "delayed":
			r.delayed()
		case "read":
			r.read()
		case "lookup":
			r.lookup()
		case "poll":
			r.poll()
		case "commit":
			r.gc.commit(r)
		case "rpoll":
			r.rpoll()
		case "tick":
			r.tick()
		case "clean":
			r.clean()
		case "restart":
			r.restart()
		default:
			r.crash()
		}
		r.checkMins()
	}
	r.step = fmt.Sprintf("%s seed %d: final check", cfg.name, seed)
	r.drain()
	r.checkAll()
	r.close()
}

// modelOpName names runModel's operation x.
func modelOpName(x int) string {
	for _, o := range []struct {
		below int
		name  string
	}{{22, "put"}, {25, "concurrent"}, {32, "batch"}, {36, "txn"}, {42, "delayed"}, {55, "read"}, {60, "lookup"},
		{72, "poll"}, {76, "commit"}, {84, "rpoll"}, {90, "tick"}, {92, "clean"}, {96, "restart"}} {
		if x < o.below {
			return o.name
		}
	}
	return "crash"
}

func (r *modelRun) open(first bool) {
	// Retention passes run only when clean asks: the in-memory FS reports
	// no disk use, and the clock never reaches DeleteHour (see advance).
	opts := &Options{Flush: r.cfg.flush, SegmentSize: r.cfg.seg, SyncFlushTimeout: time.Minute, FlowControlThreshold: -1,
		NoWarm: true, Clock: r.clk, ConsumeQueueEntries: 1024, IndexSlots: 512, IndexEntries: 2048,
		Retention: modelRetention, DeleteHour: modelDeleteHour}
	if *modelLog {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
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

const (
	modelDir       = "/store"
	modelRetention = 30 * time.Minute
	// The clock starts at 22:13 UTC and advance keeps it within 10 hours
	// of that, so the retention hour (11:00) never comes.
	modelStart      = 1_700_000_000
	modelDeleteHour = 11
	modelMaxAdvance = 10 * time.Hour
)

func (r *modelRun) startConsumers() {
	r.gc.start(r)
	r.rc.start(r)
}

// modelTopicQueues names a topic of the model and its queue count.
type modelTopicQueues = struct {
	name   string
	queues int
}

// topics are every topic the model knows: the plain ones, the delayed
// messages' and the retry group's retry and dead-letter topics.
func (r *modelRun) topics() []modelTopicQueues {
	return append(append([]modelTopicQueues(nil), modelTopics...),
		modelTopicQueues{modelDelayTopic, modelDelayQueues}, modelTopicQueues{r.retryTopic(), 1}, modelTopicQueues{r.dlqTopic(), 1})
}

func isSysTopic(name string) bool { return name[0] == '%' }

// maxOffset is MaxOffset, 0 for a system topic not created yet (the dead
// letter topic comes with the first dead letter).
func (r *modelRun) maxOffset(name string, q int) int64 {
	n, err := r.s.MaxOffset(name, q)
	if isSysTopic(name) && errors.Is(err, ErrTopicNotFound) {
		return 0
	}
	require.NoError(r.t, err, r.step)
	return n
}

// minOffset is MinOffset, 0 for a system topic not created yet.
func (r *modelRun) minOffset(name string, q int) int64 {
	n, err := r.s.MinOffset(name, q)
	if isSysTopic(name) && errors.Is(err, ErrTopicNotFound) {
		return 0
	}
	require.NoError(r.t, err, r.step)
	return n
}

func (r *modelRun) close() {
	r.gc.close(r)
	r.rc.close(r)
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

// concurrent puts to every queue of a topic at once, one goroutine per
// queue: each queue's messages must still take consecutive offsets in
// the order its goroutine sent them.
func (r *modelRun) concurrent() {
	tp := modelTopics[r.rng.IntN(len(modelTopics))]
	msgs := make([][]*Message, tp.queues)
	mms := make([][]modelMsg, tp.queues)
	for q := range msgs {
		for range 1 + r.rng.IntN(20) {
			m, mm := r.message(tp.name)
			msgs[q], mms[q] = append(msgs[q], m), append(mms[q], mm)
		}
	}
	res := make([][]PutResult, tp.queues)
	errs := make([]error, tp.queues)
	var wg sync.WaitGroup
	for q := range msgs {
		wg.Go(func() {
			for _, m := range msgs[q] {
				pr, err := r.s.Put(r.ctx, m, q)
				if err != nil {
					errs[q] = err
					return
				}
				res[q] = append(res[q], pr)
			}
		})
	}
	wg.Wait()
	for q := range msgs {
		require.NoError(r.t, errs[q], r.step)
		for i, pr := range res[q] {
			require.Equal(r.t, int64(len(r.q[tp.name][q])), pr.QueueOffset, "%s: queue offset of a concurrent put to %d", r.step, q)
			mms[q][i].id = pr.MsgID()
			r.q[tp.name][q] = append(r.q[tp.name][q], mms[q][i])
		}
	}
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
		mm.anyProps = true
		r.q[topic][q] = append(r.q[topic][q], mm)
	}
}

// read checks a random range of a random queue of any topic.
func (r *modelRun) read() {
	all := r.topics()
	tp := all[r.rng.IntN(len(all))]
	topic, q := tp.name, r.rng.IntN(tp.queues)
	want := r.q[topic][q]
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	maxOff := r.maxOffset(topic, q)
	require.Equal(r.t, int64(len(want)), maxOff, "%s: max offset of %s/%d", r.step, topic, q)
	minOff := r.minOffset(topic, q)
	require.Equal(r.t, r.min[topic][q], minOff, "%s: min offset of %s/%d", r.step, topic, q)
	if minOff > 0 {
		_, err := r.s.ReadQueue(r.ctx, topic, q, minOff-1, 1)
		require.ErrorIs(r.t, err, ErrNotFound, "%s: reading below the min offset", r.step)
	}
	if int64(len(want)) == minOff {
		return
	}
	from := minOff + r.rng.Int64N(int64(len(want))-minOff)
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
	require.Equal(r.t, w.reconsume, m.ReconsumeTimes, "%s: reconsume count at %d", r.step, off)
	switch {
	case w.anyProps:
	case len(w.props) == 0:
		require.Empty(r.t, m.Properties, "%s: properties at %d", r.step, off)
	default:
		require.Equal(r.t, w.props, m.Properties, "%s: properties at %d", r.step, off)
	}
}

// lookup finds a random message by its ID and, when it has one, its key
// (in a plain topic or the delayed messages' topic: retries share their
// message's keys).
func (r *modelRun) lookup() {
	topic, q := r.pick()
	if r.rng.IntN(3) == 0 {
		topic, q = modelDelayTopic, r.rng.IntN(modelDelayQueues)
	}
	want := r.q[topic][q]
	if len(want) == 0 {
		return
	}
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	off := r.rng.IntN(len(want))
	w := want[off]
	if int64(off) < r.min[topic][q] {
		if w.id != "" {
			_, err := r.s.MessageByID(w.id)
			require.ErrorIs(r.t, err, ErrNotFound, "%s: a message retention removed, by ID", r.step)
		}
		return
	}
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
	n := 1 + r.rng.IntN(10) // drawn first: the sequence must not depend on what is pending
	r.gc.poll(r, n)
}

// tick advances the clock: flushes, checkpoints, offset writes and
// check-backs come due, and now and then segments age past retention.
func (r *modelRun) tick() {
	d := []time.Duration{600 * time.Millisecond, 600 * time.Millisecond, 15 * time.Second, 10 * time.Minute}[r.rng.IntN(4)]
	r.clk.Advance(r.advance(d))
	r.settle()
}

// advance returns d, or a second once the clock has moved modelMaxAdvance
// from its start.
func (r *modelRun) advance(d time.Duration) time.Duration {
	if r.clk.Now().Add(d).Sub(time.Unix(modelStart, 0)) > modelMaxAdvance {
		return time.Second
	}
	return d
}

// clean runs a retention pass: queues lose a prefix (what lies in
// removed segments), never more than that.
func (r *modelRun) clean() {
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	_, err := r.s.CleanExpired()
	require.NoError(r.t, err, r.step)
	r.checkLengths(false, false)
}

// restart closes and reopens the store: nothing changes.
func (r *modelRun) restart() {
	r.close()
	r.open(false)
	require.True(r.t, r.s.Recovery().CleanShutdown, r.step)
	r.checkLengths(false, false)
	r.settle()
	r.startConsumers()
	r.gc.restarted(r)
	r.rc.restarted(r)
}

// crash opens the store on a power-loss image taken now. With FlushSync
// every queue is intact; with FlushAsync each keeps a prefix of itself,
// which the model keeps too.
func (r *modelRun) crash() {
	img := r.ffs.Crash(r.crashRng, r.rng.Float64())
	r.close()
	r.ffs = vfs.NewFaulty(img)
	// The image opens at the time of the crash, so that what it holds is
	// checked before anything else comes due; then the clock moves past
	// retention, as if the machine had been off a while.
	r.clk = clock.NewFake(r.clk.Now())
	r.open(false)
	require.False(r.t, r.s.Recovery().CleanShutdown, r.step)
	cut := r.checkLengths(r.cfg.flush == FlushAsync, true)
	for _, mm := range cut[modelQueue{r.dlqTopic(), 0}] {
		r.lost(mm.origin)
	}
	r.survivors(cut)
	r.settle() // deliveries the image lost, again
	r.clk.Advance(r.advance(40 * time.Minute))
	r.settle()
	r.startConsumers()
	r.gc.crashed(r)
	r.rc.crashed(r)
}

// checkLengths compares every queue's length with the model's and takes
// its min offset. With prefix, a shorter queue is allowed and the model is
// cut to it (the messages cut are returned); with crashed, the min offset
// may have gone back (a power loss may bring back a removal the directory
// had not made durable).
func (r *modelRun) checkLengths(prefix, crashed bool) map[modelQueue][]modelMsg {
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	cut := map[modelQueue][]modelMsg{}
	for _, dq := range r.deliveryQueues() {
		if prefix {
			cut[dq] = r.cutDeliveries(dq)
		}
	}
	for _, tp := range r.topics() {
		for q := range tp.queues {
			n := r.maxOffset(tp.name, q)
			want := int64(len(r.q[tp.name][q]))
			if prefix && r.isDelivery(tp.name) {
				n = want // cutDeliveries did it, and redeliveries may be landing
			} else if prefix && n < want {
				cut[modelQueue{tp.name, q}] = r.q[tp.name][q][n:]
				r.q[tp.name][q] = r.q[tp.name][q][:n:n]
				want = n
			}
			require.Equal(r.t, want, n, "%s: length of %s/%d", r.step, tp.name, q)
			m := r.minOffset(tp.name, q)
			require.LessOrEqual(r.t, m, n, "%s: min offset of %s/%d", r.step, tp.name, q)
			if !crashed {
				require.GreaterOrEqual(r.t, m, r.min[tp.name][q], "%s: min offset of %s/%d went back", r.step, tp.name, q)
			}
			if h := r.mins[modelQueue{tp.name, q}]; len(h) == 0 || h[len(h)-1] != m {
				r.mins[modelQueue{tp.name, q}] = append(h, m)
			}
			r.min[tp.name][q] = m
		}
	}
	if crashed {
		r.checkAll() // what is left must be the model's, byte for byte
	}
	return cut
}

// checkMins compares every queue's min offset with the model's: only a
// retention pass or a power loss moves it.
func (r *modelRun) checkMins() {
	for _, tp := range r.topics() {
		for q := range tp.queues {
			m := r.minOffset(tp.name, q)
			require.Equal(r.t, r.min[tp.name][q], m, "%s: min offset of %s/%d moved", r.step, tp.name, q)
		}
	}
}

// checkAll reads every queue from the start and compares it with the model.
func (r *modelRun) checkAll() {
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	for _, tp := range r.topics() {
		for q := range tp.queues {
			want := r.q[tp.name][q]
			for from := r.min[tp.name][q]; from < int64(len(want)); {
				got, err := r.s.ReadQueue(r.ctx, tp.name, q, from, min(64, len(want)-int(from)))
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
