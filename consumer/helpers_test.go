package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// Every consumer and Manager stops its goroutines on Close.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// fakeStore is an in-memory Source: queues of messages, a Pull that blocks
// on a channel closed at every append, and a SendBack that records what it
// got (and, with retry set, stores it in the retry topic as the root will).
type fakeStore struct {
	clk clock.Clock

	pulls   atomic.Int64 // Pull calls
	maxPull atomic.Int64 // largest max asked for

	mu struct {
		sync.Mutex
		topics    map[string][]*fakeQueue
		changed   chan struct{}
		closed    bool
		sendBacks []*message.MessageExt
		// sendBackErr, when set, fails SendBack.
		sendBackErr error
		// retry: SendBack appends to the group's retry topic (created on
		// demand) with RETRY_TOPIC set and ReconsumeTimes+1.
		retry bool
		// pullErr, when set, fails Pull once.
		pullErr error
	}
	closedCh chan struct{}
}

type fakeQueue struct {
	min  int64
	msgs []*message.MessageExt // msgs[i] has offset min+i
}

func newFakeStore(clk clock.Clock) *fakeStore {
	if clk == nil {
		clk = clock.Real
	}
	s := &fakeStore{clk: clk, closedCh: make(chan struct{})}
	s.mu.topics = map[string][]*fakeQueue{}
	s.mu.changed = make(chan struct{})
	return s
}

func (s *fakeStore) createTopic(topic string, queues int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := make([]*fakeQueue, queues)
	for i := range qs {
		qs[i] = &fakeQueue{}
	}
	s.mu.topics[topic] = qs
}

// put appends a message to topic/queue and returns its offset.
func (s *fakeStore) put(topic string, queue int, tags string, body string) int64 {
	return s.putMsg(&message.Message{Topic: topic, Tags: tags, Body: []byte(body)}, queue)
}

func (s *fakeStore) putMsg(m *message.Message, queue int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.mu.topics[m.Topic][queue]
	off := q.min + int64(len(q.msgs))
	ext := &message.MessageExt{Message: *m, QueueID: queue, QueueOffset: off,
		StoreTimestamp: s.clk.Now(), StoreSize: int32(len(m.Body) + 64), MsgID: fmt.Sprintf("%s/%d/%d", m.Topic, queue, off)}
	q.msgs = append(q.msgs, ext)
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	return off
}

// putMany appends n messages round robin over the topic's queues, bodies
// "prefix-i".
func (s *fakeStore) putMany(topic string, n int, prefix string) {
	s.mu.Lock()
	queues := len(s.mu.topics[topic])
	s.mu.Unlock()
	for i := range n {
		s.put(topic, i%queues, "", fmt.Sprintf("%s-%d", prefix, i))
	}
}

// deleteBelow drops the queue's messages below off (retention).
func (s *fakeStore) deleteBelow(topic string, queue int, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.mu.topics[topic][queue]
	n := off - q.min
	q.msgs = q.msgs[n:]
	q.min = off
}

func (s *fakeStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		close(s.closedCh)
	}
}

func (s *fakeStore) queue(topic string, queue int) (*fakeQueue, error) {
	qs, ok := s.mu.topics[topic]
	if !ok {
		return nil, fmt.Errorf("fake: %s: %w", topic, errs.ErrTopicNotFound)
	}
	if queue < 0 || queue >= len(qs) {
		return nil, fmt.Errorf("fake: %s queue %d: %w", topic, queue, errs.ErrInvalidArgument)
	}
	return qs[queue], nil
}

func (s *fakeStore) QueueCount(topic string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs, ok := s.mu.topics[topic]
	if !ok {
		return 0, fmt.Errorf("fake: %s: %w", topic, errs.ErrTopicNotFound)
	}
	return len(qs), nil
}

func (s *fakeStore) MinOffset(topic string, queue int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queue(topic, queue)
	if err != nil {
		return 0, err
	}
	return q.min, nil
}

func (s *fakeStore) MaxOffset(topic string, queue int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queue(topic, queue)
	if err != nil {
		return 0, err
	}
	return q.min + int64(len(q.msgs)), nil
}

func (s *fakeStore) OffsetForTime(topic string, queue int, t time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queue(topic, queue)
	if err != nil {
		return 0, err
	}
	for i, m := range q.msgs {
		if !m.StoreTimestamp.Before(t) {
			return q.min + int64(i), nil
		}
	}
	return q.min + int64(len(q.msgs)), nil
}

func (s *fakeStore) Pull(ctx context.Context, topic string, queue int, from int64, max int, f Filter, _ *message.Pool) ([]*message.MessageExt, int64, error) {
	s.pulls.Add(1)
	for {
		if cur := s.maxPull.Load(); int64(max) > cur {
			s.maxPull.CompareAndSwap(cur, int64(max))
		} else {
			break
		}
	}
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, 0, errs.ErrClosed
		}
		if err := s.mu.pullErr; err != nil {
			s.mu.pullErr = nil
			s.mu.Unlock()
			return nil, 0, err
		}
		q, err := s.queue(topic, queue)
		if err != nil {
			s.mu.Unlock()
			return nil, 0, err
		}
		if from < q.min {
			s.mu.Unlock()
			return nil, 0, fmt.Errorf("fake: offset %d below min %d: %w", from, q.min, errs.ErrNotFound)
		}
		end := q.min + int64(len(q.msgs))
		if from < end {
			var out []*message.MessageExt
			next := from
			for ; next < end && len(out) < max && next-from < int64(16*max); next++ {
				m := q.msgs[next-q.min]
				if f != nil && (!f.MatchCode(message.TagsCode(m.Tags)) || !f.Match(&m.Message)) {
					continue
				}
				c := *m
				c.Properties = maps.Clone(m.Properties)
				out = append(out, &c)
			}
			s.mu.Unlock()
			return out, next, nil
		}
		ch := s.mu.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-s.closedCh:
		}
	}
}

func (s *fakeStore) SendBack(ctx context.Context, group string, m *message.MessageExt) error {
	s.mu.Lock()
	if err := s.mu.sendBackErr; err != nil {
		s.mu.Unlock()
		return err
	}
	c := *m
	c.Properties = maps.Clone(m.Properties)
	s.mu.sendBacks = append(s.mu.sendBacks, &c)
	retry := s.mu.retry
	if retry {
		rt := RetryTopic(group)
		if _, ok := s.mu.topics[rt]; !ok {
			s.mu.topics[rt] = []*fakeQueue{{}}
		}
	}
	s.mu.Unlock()
	if retry {
		props := maps.Clone(m.Properties)
		if props == nil {
			props = map[string]string{}
		}
		props[PropRetryTopic] = m.Topic
		nm := m.Message
		nm.Topic = RetryTopic(group)
		nm.Properties = props
		nm.ReconsumeTimes = m.ReconsumeTimes + 1
		s.putMsg(&nm, 0)
	}
	return nil
}

func (s *fakeStore) sentBack() []*message.MessageExt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*message.MessageExt(nil), s.mu.sendBacks...)
}

func (s *fakeStore) setSendBackErr(err error) {
	s.mu.Lock()
	s.mu.sendBackErr = err
	s.mu.Unlock()
}

// tagFilter is a tiny Filter for the tests: tags in a set.
type tagFilter struct{ tags []string }

func (f tagFilter) MatchCode(c uint32) bool {
	for _, t := range f.tags {
		if message.TagsCode(t) == c {
			return true
		}
	}
	return false
}

func (f tagFilter) Match(m *message.Message) bool {
	for _, t := range f.tags {
		if m.Tags == t {
			return true
		}
	}
	return false
}

func (f tagFilter) Type() string   { return "TAG" }
func (f tagFilter) String() string { return strings.Join(f.tags, " || ") }

// env is a fake store plus a Manager over an in-memory FS.
type env struct {
	t   testing.TB
	st  *fakeStore
	fs  *vfs.MemFS
	clk clock.Clock
	mg  *Manager
}

const cfgDir = "/store/config"

func newEnv(t testing.TB, clk clock.Clock) *env {
	t.Helper()
	if clk == nil {
		clk = clock.Real
	}
	e := &env{t: t, st: newFakeStore(clk), fs: newMemFS(), clk: clk}
	e.open()
	t.Cleanup(func() {
		if err := e.mg.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
		e.st.close()
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	mg, err := NewManager(e.st, ManagerOptions{FS: e.fs, Dir: cfgDir, Clock: e.clk})
	if err != nil {
		e.t.Fatalf("NewManager: %v", err)
	}
	e.mg = mg
}

// reopen closes the Manager and opens a new one on the same files.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.mg.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.open()
}

func (e *env) push(group string, o Options, topic string, h Handler) *PushConsumer {
	e.t.Helper()
	c, err := e.mg.NewPushConsumer(group, o)
	if err != nil {
		e.t.Fatalf("NewPushConsumer: %v", err)
	}
	if topic != "" {
		if err := c.Subscribe(topic, nil); err != nil {
			e.t.Fatalf("Subscribe: %v", err)
		}
	}
	if err := c.Start(h); err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	return c
}

func (e *env) pull(group string, o Options, topic string) *PullConsumer {
	e.t.Helper()
	c, err := e.mg.NewPullConsumer(group, o)
	if err != nil {
		e.t.Fatalf("NewPullConsumer: %v", err)
	}
	if topic != "" {
		if err := c.Subscribe(topic, nil); err != nil {
			e.t.Fatalf("Subscribe: %v", err)
		}
	}
	return c
}

// committed returns the group's committed offset of a queue (-1: none).
func (e *env) committed(group, instance, topic string, queue int) int64 {
	off, ok := e.mg.offsets.get(offsetKey{group, instance, topic, queue})
	if !ok {
		return -1
	}
	return off
}

// waitFor blocks on ch with a generous real-time guard so that a bug
// fails the test instead of hanging it.
func waitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func isErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

func newMemFS() *vfs.MemFS { return vfs.NewMem() }

// growTopic adds queues to a topic.
func (s *fakeStore) growTopic(topic string, queues int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.mu.topics[topic]) < queues {
		s.mu.topics[topic] = append(s.mu.topics[topic], &fakeQueue{})
	}
}
