package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/producer"
	"github.com/mqlite/mqlite/vfs"
)

// queueCounts reads every queue of topic to its end.
func queueCounts(t *testing.T, s *Store, topic string) []int64 {
	t.Helper()
	c, err := s.Topic(topic)
	require.NoError(t, err)
	out := make([]int64, c.Queues)
	for q := range out {
		out[q], err = s.MaxOffset(topic, q)
		require.NoError(t, err)
	}
	return out
}

func TestRoundRobinSpreadsEvenly(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("rr", TopicConfig{Queues: 5}))
	p := newProducer(t, s, ProducerOptions{})
	for i := range 500 {
		r, err := p.Send(context.Background(), &Message{Topic: "rr", Body: body(i)})
		require.NoError(t, err)
		require.Equal(t, SendOK, r.Status)
		require.Equal(t, "rr", r.Topic)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	require.Equal(t, []int64{100, 100, 100, 100, 100}, queueCounts(t, s, "rr"))
}

// TestShardingKeyKeepsPerKeyOrder runs 8 producers concurrently; each
// key's messages land in one queue, each producer's in send order.
func TestShardingKeyKeepsPerKeyOrder(t *testing.T) {
	s := memStore(t, Options{Flush: FlushSync})
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 8}))
	const producers, each, keys = 8, 300, 16
	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.NewProducer(ProducerOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			defer p.Close()
			for i := range each {
				key := fmt.Sprintf("o-%d", (g*7+i)%keys)
				m := &Message{Topic: "orders", ShardingKey: key, Body: []byte(fmt.Sprintf("%d/%d/%s", g, i, key))}
				if _, err := p.Send(context.Background(), m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, s.WaitVisible(context.Background()))
	queueOf := map[string]int{}
	last := map[string]int{} // producer/key -> last seq
	total := 0
	for q := range 8 {
		for m, err := range s.Messages("orders", q, 0) {
			require.NoError(t, err)
			var g, i int
			var key string
			_, err := fmt.Sscanf(strings.ReplaceAll(string(m.Body), "/", " "), "%d %d %s", &g, &i, &key)
			require.NoError(t, err)
			if prev, ok := queueOf[key]; ok {
				require.Equal(t, prev, q, "key %s in two queues", key)
			}
			queueOf[key] = q
			require.Equal(t, producer.ShardingQueue(key, 8), q)
			pk := fmt.Sprintf("%d/%s", g, key)
			if prev, ok := last[pk]; ok {
				require.Greater(t, i, prev, "order of %s", pk)
			}
			last[pk] = i
			total++
		}
	}
	require.Equal(t, producers*each, total)
	require.Len(t, queueOf, keys)
}

func TestSelectorAndGlobalOrder(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("one", TopicConfig{Queues: 1}))
	require.NoError(t, s.CreateTopic("four", TopicConfig{Queues: 4}))
	p := newProducer(t, s, ProducerOptions{Selector: func(m *Message, n int) int { return len(m.Body) % n }})
	for i := range 40 {
		r, err := p.Send(context.Background(), &Message{Topic: "one", Body: body(i)})
		require.NoError(t, err)
		require.Equal(t, 0, r.QueueID)
		require.Equal(t, int64(i), r.QueueOffset, "one queue: global order")
	}
	r, err := p.Send(context.Background(), &Message{Topic: "four", Body: []byte("abcdef")})
	require.NoError(t, err)
	require.Equal(t, 2, r.QueueID)

	bad := newProducer(t, s, ProducerOptions{Selector: func(*Message, int) int { return 4 }})
	before := s.log.WrotePosition()
	_, err = bad.Send(context.Background(), &Message{Topic: "four", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, before, s.log.WrotePosition())
}

func TestSendAsyncCallsBackOnceWithinTheBound(t *testing.T) {
	for _, flush := range []FlushMode{FlushAsync, FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			s := memStore(t, Options{Flush: flush})
			const n, bound = 100_000, 256
			p := newProducer(t, s, ProducerOptions{MaxInFlight: bound})
			calls := make([]atomic.Int32, n)
			var accepted, done, maxPending atomic.Int64
			goroutines := runtime.NumGoroutine()
			var maxGoroutines atomic.Int64
			for i := range n {
				err := p.SendAsync(context.Background(), &Message{Topic: "async", Body: body(i % 50)}, func(r SendResult, err error) {
					if err != nil {
						t.Error(err)
					}
					calls[i].Add(1)
					done.Add(1)
				})
				require.NoError(t, err)
				pending := accepted.Add(1) - done.Load()
				if pending > maxPending.Load() {
					maxPending.Store(pending)
				}
				if i%1000 == 0 {
					maxGoroutines.Store(max(maxGoroutines.Load(), int64(runtime.NumGoroutine())))
				}
			}
			require.NoError(t, p.Close())
			require.Equal(t, int64(n), done.Load(), "Close waits for every callback")
			for i := range calls {
				require.Equal(t, int32(1), calls[i].Load(), "callback %d", i)
			}
			require.LessOrEqual(t, maxPending.Load(), int64(bound))
			require.LessOrEqual(t, maxGoroutines.Load(), int64(goroutines+2), "one worker, no goroutine per send")
			require.ErrorIs(t, p.SendAsync(context.Background(), &Message{Topic: "async", Body: []byte("late")}, func(SendResult, error) {}), ErrClosed)
			_, err := p.Send(context.Background(), &Message{Topic: "async", Body: []byte("late")})
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// TestCloseReleasesBlockedAsyncSenders fills the in-flight bound with a
// callback that blocks, then closes: the blocked sender fails with
// ErrClosed, Close waits for the accepted send's callback.
func TestCloseReleasesBlockedAsyncSenders(t *testing.T) {
	s := memStore(t, Options{})
	p := newProducer(t, s, ProducerOptions{MaxInFlight: 1})
	inCallback, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	require.NoError(t, p.SendAsync(context.Background(), &Message{Topic: "a", Body: []byte("1")}, func(SendResult, error) {
		calls.Add(1)
		close(inCallback)
		<-release
	}))
	<-inCallback
	// The bound is reached: a send with a short ctx gives up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := s.log.WrotePosition()
	require.ErrorIs(t, p.SendAsync(ctx, &Message{Topic: "a", Body: []byte("2")}, func(SendResult, error) { calls.Add(1) }), context.Canceled)
	require.Equal(t, before, s.log.WrotePosition(), "nothing stored")

	blocked := make(chan error)
	go func() {
		blocked <- p.SendAsync(context.Background(), &Message{Topic: "a", Body: []byte("3")}, func(SendResult, error) { calls.Add(1) })
	}()
	closed := make(chan error)
	go func() { closed <- p.Close() }()
	require.ErrorIs(t, <-blocked, ErrClosed)
	close(release)
	require.NoError(t, <-closed)
	require.Equal(t, int32(1), calls.Load())
	require.NoError(t, p.Close(), "idempotent")
}

func TestSendBatchIsAtomicAndOrdered(t *testing.T) {
	s := memStore(t, Options{Flush: FlushSync})
	require.NoError(t, s.CreateTopic("b", TopicConfig{Queues: 3}))
	p := newProducer(t, s, ProducerOptions{})
	batch := make([]*Message, 64)
	for i := range batch {
		batch[i] = &Message{Topic: "b", Keys: []string{fmt.Sprintf("k%d", i)}, Body: body(i)}
	}
	rs, err := p.SendBatch(context.Background(), batch)
	require.NoError(t, err)
	require.Len(t, rs, 64)
	q := rs[0].QueueID
	for i, r := range rs {
		require.Equal(t, q, r.QueueID)
		require.Equal(t, int64(i), r.QueueOffset)
		require.Equal(t, SendOK, r.Status)
	}
	msgs, err := s.ReadQueue(context.Background(), "b", q, 0, 100)
	require.NoError(t, err)
	require.Len(t, msgs, 64, "all visible at once")
	for i, m := range msgs {
		require.Equal(t, body(i), m.Body)
	}

	before, counts := s.log.WrotePosition(), queueCounts(t, s, "b")
	bad := func(mut func([]*Message) []*Message) []*Message {
		c := make([]*Message, 3)
		for i := range c {
			c[i] = &Message{Topic: "b", Body: body(i)}
		}
		return mut(c)
	}
	cases := []struct {
		name string
		msgs []*Message
		want error
	}{
		{"empty", nil, ErrInvalidArgument},
		{"nil message", bad(func(c []*Message) []*Message { c[1] = nil; return c }), ErrInvalidArgument},
		{"mixed topics", bad(func(c []*Message) []*Message { c[2].Topic = "other"; return c }), ErrInvalidArgument},
		{"delay", bad(func(c []*Message) []*Message { c[1].DelayLevel = 2; return c }), ErrInvalidDelay},
		{"deliver-at", bad(func(c []*Message) []*Message { c[1].DeliverAt = time.Now().Add(time.Minute); return c }), ErrInvalidDelay},
		{"empty body in the middle", bad(func(c []*Message) []*Message { c[1].Body = nil; return c }), ErrEmptyBody},
		{"bad key at the end", bad(func(c []*Message) []*Message { c[2].Keys = []string{"a b"}; return c }), ErrInvalidKey},
		{"too large in total", func() []*Message {
			c := make([]*Message, 5)
			for i := range c {
				c[i] = &Message{Topic: "b", Body: make([]byte, 1<<20)}
			}
			return c
		}(), ErrMessageTooLarge},
	}
	for _, c := range cases {
		_, err := p.SendBatch(context.Background(), c.msgs)
		require.ErrorIs(t, err, c.want, c.name)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	require.Equal(t, before, s.log.WrotePosition(), "no bad batch stored anything")
	require.Equal(t, counts, queueCounts(t, s, "b"))
}

func TestCompressedBodiesReadBackWhole(t *testing.T) {
	s := memStore(t, Options{})
	p := newProducer(t, s, ProducerOptions{CompressOver: 1024})
	big := bytes.Repeat([]byte("compressible "), 2000)
	r, err := p.Send(context.Background(), &Message{Topic: "z", Body: big})
	require.NoError(t, err)
	require.Less(t, r.Size, len(big)/4, "stored compressed")
	small, err := p.Send(context.Background(), &Message{Topic: "z", Body: []byte("tiny")})
	require.NoError(t, err)
	m, err := s.MessageByID(r.MsgID())
	require.NoError(t, err)
	require.Equal(t, big, m.Body)
	require.Zero(t, m.SysFlag, "flags cleared for the reader")
	m, err = s.MessageByID(small.MsgID())
	require.NoError(t, err)
	require.Equal(t, "tiny", string(m.Body))
}

func TestFlushTimeoutIsAStatus(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	ffs := vfs.NewFaulty(vfs.NewMem())
	s, err := openFS(ffs, "/t", smallFiles(&Options{Flush: FlushSync, Clock: clk, SyncFlushTimeout: time.Second, SegmentSize: 1 << 20}))
	require.NoError(t, err)
	defer s.Close()
	syncing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpMapSync && strings.Contains(path, "commitlog") {
			once.Do(func() { close(syncing); <-release })
		}
		return nil
	})
	// No retries: a retry would wait for the blocked sync again.
	p := newProducer(t, s, ProducerOptions{RetryTimesWhenSendFailed: -1})
	type out struct {
		r   SendResult
		err error
	}
	done := make(chan out)
	go func() {
		r, err := p.Send(context.Background(), &Message{Topic: "slow", Body: []byte("x")})
		done <- out{r, err}
	}()
	<-syncing // the waiter's timer exists before it kicks the sync
	clk.Advance(2 * time.Second)
	o := <-done
	close(release)
	require.ErrorIs(t, o.err, ErrFlushTimeout)
	require.Equal(t, FlushDiskTimeout, o.r.Status)
	require.Equal(t, "FLUSH_DISK_TIMEOUT", o.r.Status.String())
	m, err := s.MessageByID(o.r.MsgID())
	require.NoError(t, err, "stored all the same")
	require.Equal(t, "x", string(m.Body))
}

// TestBadSendsStoreNothing runs every validation rule through each send
// mode: the sentinel comes back and the CommitLog does not move.
func TestBadSendsStoreNothing(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	s := memStore(t, Options{Clock: clk, MaxMessageSize: 1024, DisableAutoCreateTopics: true})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	p := newProducer(t, s, ProducerOptions{MaxMessageSize: 512})
	ok := func() *Message { return &Message{Topic: "t", Body: []byte("x")} }
	with := func(f func(*Message)) *Message { m := ok(); f(m); return m }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		m    *Message
		ctx  context.Context
		want error
	}{
		{"nil message", nil, nil, ErrInvalidArgument},
		{"empty topic", with(func(m *Message) { m.Topic = "" }), nil, ErrInvalidTopic},
		{"illegal topic char", with(func(m *Message) { m.Topic = "a/b" }), nil, ErrInvalidTopic},
		{"topic too long", with(func(m *Message) { m.Topic = strings.Repeat("x", 128) }), nil, ErrInvalidTopic},
		{"system topic", with(func(m *Message) { m.Topic = "SCHEDULE_TOPIC_XXXX" }), nil, ErrInvalidTopic},
		{"retry topic", with(func(m *Message) { m.Topic = "%RETRY%g" }), nil, ErrInvalidTopic},
		{"unknown topic", with(func(m *Message) { m.Topic = "nope" }), nil, ErrTopicNotFound},
		{"empty body", with(func(m *Message) { m.Body = nil }), nil, ErrEmptyBody},
		{"body over the producer limit", with(func(m *Message) { m.Body = make([]byte, 513) }), nil, ErrMessageTooLarge},
		{"tags with ||", with(func(m *Message) { m.Tags = "a||b" }), nil, ErrInvalidTags},
		{"tags with a control char", with(func(m *Message) { m.Tags = "a\x01" }), nil, ErrInvalidTags},
		{"tags with a tab", with(func(m *Message) { m.Tags = "a\tb" }), nil, ErrInvalidTags},
		{"empty key", with(func(m *Message) { m.Keys = []string{""} }), nil, ErrInvalidKey},
		{"key with space", with(func(m *Message) { m.Keys = []string{"a b"} }), nil, ErrInvalidKey},
		{"reserved property", with(func(m *Message) { m.Properties = map[string]string{"TAGS": "x"} }), nil, ErrInvalidProperty},
		{"property with separator", with(func(m *Message) { m.Properties = map[string]string{"a": "b\x02"} }), nil, ErrInvalidProperty},
		{"properties too large", with(func(m *Message) { m.Properties = map[string]string{"a": strings.Repeat("v", 40000)} }), nil, ErrInvalidProperty},
		{"negative delay level", with(func(m *Message) { m.DelayLevel = -1 }), nil, ErrInvalidDelay},
		{"deliver-at too far", with(func(m *Message) { m.DeliverAt = clk.Now().Add(4 * 24 * time.Hour) }), nil, ErrInvalidDelay},
		{"delay level and deliver-at", with(func(m *Message) { m.DelayLevel = 1; m.DeliverAt = clk.Now().Add(time.Hour) }), nil, ErrInvalidDelay},
		{"cancelled context", ok(), cancelled, context.Canceled},
	}
	before := s.log.WrotePosition()
	for _, c := range cases {
		ctx := c.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		_, err := p.Send(ctx, c.m)
		require.ErrorIs(t, err, c.want, "Send: %s", c.name)
		err = p.SendAsync(ctx, c.m, func(SendResult, error) { t.Errorf("callback for %s", c.name) })
		require.ErrorIs(t, err, c.want, "SendAsync: %s", c.name)
		if c.ctx == nil {
			require.ErrorIs(t, p.SendOneway(c.m), c.want, "SendOneway: %s", c.name)
		}
		if c.m != nil {
			_, err = p.SendBatch(ctx, []*Message{c.m})
			require.ErrorIs(t, err, c.want, "SendBatch: %s", c.name)
			if c.name != "body over the producer limit" { // the store's limit is 1024
				_, err = s.Put(ctx, c.m, 0)
				require.ErrorIs(t, err, c.want, "Put: %s", c.name)
			}
		}
		require.Equal(t, before, s.log.WrotePosition(), "nothing stored: %s", c.name)
	}
	_, err := s.Put(context.Background(), ok(), 2)
	require.ErrorIs(t, err, ErrInvalidArgument, "queue past the topic's count")
	require.Equal(t, before, s.log.WrotePosition())
	require.NoError(t, p.SendOneway(ok()))
	require.Greater(t, s.log.WrotePosition(), before, "a good oneway send is stored")
}

func TestTopicsSurviveRestartAndAutoCreate(t *testing.T) {
	fs := vfs.NewMem()
	s, err := openFS(fs, "/s", smallFiles(&Options{DefaultTopicQueues: 3, SegmentSize: 64 << 10}))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 8}))
	p, err := s.NewProducer(ProducerOptions{AutoCreateQueues: 6})
	require.NoError(t, err)
	_, err = p.Send(context.Background(), &Message{Topic: "auto6", Body: []byte("x")})
	require.NoError(t, err)
	_, err = s.Put(context.Background(), &Message{Topic: "auto3", Body: []byte("x")}, 0)
	require.NoError(t, err)
	require.ErrorIs(t, s.UpdateTopic("orders", TopicConfig{Queues: 4}), ErrInvalidArgument)
	require.NoError(t, s.UpdateTopic("orders", TopicConfig{Queues: 10}))
	require.NoError(t, s.Close())
	_, err = s.NewProducer(ProducerOptions{})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.SendOneway(&Message{Topic: "orders", Body: []byte("x")}), ErrClosed, "closed with the store")

	s, err = openFS(fs, "/s", smallFiles(&Options{DisableAutoCreateTopics: true, SegmentSize: 64 << 10}))
	require.NoError(t, err)
	defer s.Close()
	var got []string
	for _, ti := range s.Topics() {
		if ti.System {
			continue
		}
		got = append(got, fmt.Sprintf("%s:%d", ti.Name, ti.Config.Queues))
	}
	require.Equal(t, []string{"auto3:3", "auto6:6", "orders:10"}, got)
	_, err = s.Put(context.Background(), &Message{Topic: "fresh", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.NoError(t, s.DeleteTopic("auto3"))
	_, err = s.Put(context.Background(), &Message{Topic: "auto3", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, ErrTopicNotFound)
}
