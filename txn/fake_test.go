package txn_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// errCrash is what Append returns once the fake "crashed".
var errCrash = errors.New("fake: crashed")

// fakeStore is an in-memory txn.Host. Records go through the real payload
// encoding, get CommitLog offsets in append order, and become readable
// either at once or, with manual dispatch, when dispatch is called (always
// a prefix of the log, as the root's dispatcher).
type fakeStore struct {
	clk *clock.Fake

	mu         sync.Mutex
	auto       bool                  // auto-create user topics
	topics     map[string]int        // queue counts
	log        []*message.MessageExt // every stored record, in CommitLog order
	byOff      map[int64]*message.MessageExt
	queues     map[string][][]*message.MessageExt // visible records per topic and queue
	min        map[string]int64                   // per topic (queue 0): first readable offset
	next       map[string][]int64                 // next queue offset per topic and queue
	visible    int                                // records of log visible
	manual     bool                               // dispatch is explicit
	uniq       map[string][]time.Time             // topic#uniq -> store times, visible only
	clOff      int64
	seq        int
	appends    int
	crashAfter int                            // appends allowed before the crash; <0: never
	fail       func(m *message.Message) error // before storing
	flushTO    func(m *message.Message) bool  // stored, then ErrFlushTimeout
	onAppend   func(m *message.MessageExt)
}

func newFakeStore(clk *clock.Fake) *fakeStore {
	return &fakeStore{
		clk: clk, auto: true, topics: map[string]int{}, byOff: map[int64]*message.MessageExt{},
		queues: map[string][][]*message.MessageExt{}, min: map[string]int64{}, next: map[string][]int64{},
		uniq: map[string][]time.Time{}, crashAfter: -1,
	}
}

func (f *fakeStore) Validate(m *message.Message) error {
	if err := message.Validate(m, 0, message.MaxTopicLen, message.UniqLen, f.clk.Now()); err != nil {
		return err
	}
	if topic.IsSystem(m.Topic) {
		return fmt.Errorf("%w: %q is reserved", message.ErrInvalidTopic, m.Topic)
	}
	return nil
}

func (f *fakeStore) QueueCount(t string, auto int) (int, error) {
	if topic.IsSystem(t) {
		return 0, message.ErrInvalidTopic
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.topics[t]; n > 0 {
		return n, nil
	}
	if !f.auto {
		return 0, errs.ErrTopicNotFound
	}
	if auto <= 0 {
		auto = 4
	}
	f.createLocked(t, auto)
	return auto, nil
}

func (f *fakeStore) createLocked(t string, n int) {
	f.topics[t] = n
	f.next[t] = make([]int64, n)
	f.queues[t] = make([][]*message.MessageExt, n)
}

// crash makes every later Append fail; restart undoes it.
func (f *fakeStore) crash()   { f.mu.Lock(); f.crashAfter = f.appends; f.mu.Unlock() }
func (f *fakeStore) restart() { f.mu.Lock(); f.crashAfter = -1; f.mu.Unlock() }

func (f *fakeStore) Append(ctx context.Context, m *message.Message, queue int) (message.PutResult, error) {
	f.mu.Lock()
	if f.crashAfter >= 0 && f.appends >= f.crashAfter {
		f.mu.Unlock()
		return message.PutResult{}, errCrash
	}
	if f.fail != nil {
		if err := f.fail(m); err != nil {
			f.mu.Unlock()
			return message.PutResult{}, err
		}
	}
	n := f.topics[m.Topic]
	if n == 0 {
		if !topic.IsSystem(m.Topic) {
			f.mu.Unlock()
			return message.PutResult{}, fmt.Errorf("fake: append to %q: %w", m.Topic, errs.ErrTopicNotFound)
		}
		n = 1
		f.createLocked(m.Topic, 1)
	}
	if queue < 0 || queue >= n {
		f.mu.Unlock()
		return message.PutResult{}, fmt.Errorf("fake: queue %d of %q: %w", queue, m.Topic, errs.ErrInvalidArgument)
	}
	f.appends++
	now := f.clk.Now()
	meta := message.Meta{QueueID: int32(queue), QueueOffset: f.next[m.Topic][queue], StoreMs: now.UnixMilli(), BornMs: now.UnixMilli()}
	if !m.BornTimestamp.IsZero() {
		meta.BornMs = m.BornTimestamp.UnixMilli()
	}
	var gen [message.UniqLen]byte
	if m.UniqKey == "" {
		f.seq++
		copy(gen[:], fmt.Sprintf("%032X", f.seq))
		meta.Uniq = gen[:]
	}
	buf := make([]byte, message.PayloadSize(m, len(meta.Uniq)))
	message.Encode(buf, m, &meta)
	ext := &message.MessageExt{}
	if err := message.Decode(buf, ext); err != nil {
		f.mu.Unlock()
		return message.PutResult{}, err
	}
	f.next[m.Topic][queue]++
	ext.CommitLogOffset = f.clOff
	ext.StoreSize = int32(len(buf))
	ext.MsgID = message.ID(f.clOff)
	f.clOff += int64(len(buf))
	f.log = append(f.log, ext)
	f.byOff[ext.CommitLogOffset] = ext
	if !f.manual {
		f.dispatchLocked(len(f.log))
	}
	hook := f.onAppend
	var err error
	if f.flushTO != nil && f.flushTO(m) {
		err = fmt.Errorf("fake: %w", errs.ErrFlushTimeout)
	}
	f.mu.Unlock()
	if hook != nil {
		hook(ext)
	}
	return message.NewPutResult(ext.CommitLogOffset, len(buf), queue, meta.QueueOffset, now, m.UniqKey, &gen), err
}

// dispatch makes n more records readable (all if n < 0).
func (f *fakeStore) dispatch(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 || f.visible+n > len(f.log) {
		n = len(f.log) - f.visible
	}
	f.dispatchLocked(f.visible + n)
}

func (f *fakeStore) dispatchLocked(upTo int) {
	for ; f.visible < upTo; f.visible++ {
		m := f.log[f.visible]
		q := f.queues[m.Topic]
		q[m.QueueID] = append(q[m.QueueID], m)
		k := m.Topic + "#" + m.UniqKey
		f.uniq[k] = append(f.uniq[k], m.StoreTimestamp)
	}
}

// trim deletes the first n readable messages of t's queue 0 (retention).
func (f *fakeStore) trim(t string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.min[t] += int64(n)
}

func (f *fakeStore) Read(t string, queue int, from int64, max int) ([]*message.MessageExt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs, ok := f.queues[t]
	if !ok {
		return nil, errs.ErrTopicNotFound
	}
	if queue < 0 || queue >= len(qs) {
		return nil, errs.ErrInvalidArgument
	}
	if from < f.min[t] {
		return nil, errs.ErrNotFound
	}
	q := qs[queue]
	if from >= int64(len(q)) {
		return []*message.MessageExt{}, nil
	}
	out := make([]*message.MessageExt, 0, min(max, len(q)-int(from)))
	for _, m := range q[from:min(int(from)+max, len(q))] {
		out = append(out, clone(m))
	}
	return out, nil
}

func (f *fakeStore) MaxOffset(t string, queue int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs, ok := f.queues[t]
	if !ok {
		return 0, errs.ErrTopicNotFound
	}
	return int64(len(qs[queue])), nil
}

func (f *fakeStore) ReadAt(off int64) (*message.MessageExt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.byOff[off]
	if !ok {
		return nil, errs.ErrNotFound
	}
	if m.QueueOffset < f.min[m.Topic] {
		return nil, errs.ErrNotFound
	}
	return clone(m), nil
}

func (f *fakeStore) HasUniqKey(t, uniq string, since time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ts := range f.uniq[t+"#"+uniq] {
		if !ts.Before(since) {
			return true, nil
		}
	}
	return false, nil
}

// messages returns every stored record of topic (all queues), readable or
// not, in CommitLog order.
func (f *fakeStore) messages(t string) []*message.MessageExt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*message.MessageExt
	for _, m := range f.log {
		if m.Topic == t {
			out = append(out, clone(m))
		}
	}
	return out
}

func (f *fakeStore) appendCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appends
}

func clone(m *message.MessageExt) *message.MessageExt {
	c := *m
	c.Body = slices.Clone(m.Body)
	c.Keys = slices.Clone(m.Keys)
	if m.Properties != nil {
		c.Properties = make(map[string]string, len(m.Properties))
		for k, v := range m.Properties {
			c.Properties[k] = v
		}
	}
	return &c
}
