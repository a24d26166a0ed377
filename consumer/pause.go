package consumer

import (
	"fmt"
	"slices"

	"github.com/mqlite/mqlite/internal/errs"
)

// pauseSet is the paused queues of one topic: every queue when all is
// set, except those in flip; else just those in flip.
type pauseSet struct {
	all  bool
	flip map[int]bool
}

func (s *pauseSet) has(q int) bool { return s.all != s.flip[q] }

// set pauses (on) or resumes the queues qs, or the whole topic when qs is
// empty.
func (s *pauseSet) set(on bool, qs []int) {
	if len(qs) == 0 {
		s.all, s.flip = on, nil
		return
	}
	if s.flip == nil {
		s.flip = map[int]bool{}
	}
	for _, q := range qs {
		if on == s.all {
			delete(s.flip, q)
		} else {
			s.flip[q] = true
		}
	}
}

func (s *pauseSet) empty() bool { return !s.all && len(s.flip) == 0 }

// Pause stops fetching and consuming queues of topic: the listed ones, or
// every queue of the topic when none is listed (RocketMQ's Suspend). A
// paused queue starts no Pull and hands no batch to the handler; handler
// calls already running finish (with the few batches their goroutines
// took along, see the package doc) and are committed. The queue keeps its
// committed offset and, for an orderly consumer, its lock, so no other
// member takes it; Resume goes on from where it stopped. A pull already
// waiting in the store when Pause is called may still cache what it gets;
// that is handed over after Resume.
//
// A pause belongs to this consumer and lasts until Resume: queues of a
// paused topic (or a paused queue) that a rebalance hands to this
// consumer later arrive paused, and queues it hands away are no longer
// paused for their new owner. It is kept in memory only: a consumer
// created again after a restart starts unpaused (as RocketMQ's).
//
// topic is a topic the consumer subscribes to (or, for a clustering
// consumer, the group's retry topic, RetryTopic(group)); each queue must
// be within the topic's queue count, which needs the topic to exist.
// Errors, which change nothing: ErrInvalidArgument for a topic not
// subscribed, a queue out of range, or a consumer not started;
// ErrTopicNotFound when queues are listed of a topic the store does not
// know yet; ErrClosed after Shutdown or Close. Pausing what is paused is
// no error.
func (c *PushConsumer) Pause(topic string, queues ...int) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.setPaused("pause", true, topic, queues)
}

// Resume undoes Pause for the listed queues of topic, or for every queue
// of the topic when none is listed (whether they were paused one by one
// or as a topic). Resumed queues fetch and consume again from where they
// stopped: nothing is skipped or delivered twice. Its arguments and
// errors are Pause's; resuming what is not paused is no error.
func (c *PushConsumer) Resume(topic string, queues ...int) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.setPaused("resume", false, topic, queues)
}

// Paused returns the queues this consumer holds that are paused, sorted.
func (c *PushConsumer) Paused() []Queue {
	if c == nil {
		return nil
	}
	var out []Queue
	for _, p := range c.m.activeList() {
		p.mu.Lock()
		if p.mu.paused {
			out = append(out, p.q)
		}
		p.mu.Unlock()
	}
	return out
}

// checkRunning returns ErrInvalidArgument before Start and ErrClosed once
// the consumer is stopping or closed.
func (m *member) checkRunning(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.mu.state {
	case memberIdle:
		return fmt.Errorf("mqlite/consumer: %s before Start: %w", op, ErrInvalidArgument)
	case memberRunning:
		return nil
	}
	return ErrClosed
}

// validatePause checks the arguments of Pause and Resume.
func (m *member) validatePause(op, topic string, queues []int) error {
	if err := m.checkRunning(op); err != nil {
		return err
	}
	if _, ok := m.subsMap()[topic]; !ok {
		return fmt.Errorf("mqlite/consumer: %s: topic %q is not subscribed by this consumer: %w", op, topic, ErrInvalidArgument)
	}
	if len(queues) == 0 {
		return nil
	}
	n, err := m.validateTopic(op, topic)
	if err != nil {
		return err
	}
	for _, q := range queues {
		if q < 0 || q >= n {
			return fmt.Errorf("mqlite/consumer: %s: queue %d of %s is outside [0, %d): %w", op, q, topic, n, ErrInvalidArgument)
		}
	}
	return nil
}

// setPaused applies Pause (on) or Resume to the member's pause state and
// to the queues it holds.
func (m *member) setPaused(op string, on bool, topic string, queues []int) error {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if err := m.validatePause(op, topic, queues); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.state != memberRunning {
		m.mu.Unlock()
		return ErrClosed
	}
	s := m.mu.paused[topic]
	if s == nil {
		if !on {
			m.mu.Unlock()
			return nil // nothing paused on topic
		}
		s = &pauseSet{}
		if m.mu.paused == nil {
			m.mu.paused = map[string]*pauseSet{}
		}
		m.mu.paused[topic] = s
	}
	s.set(on, queues)
	if s.empty() {
		delete(m.mu.paused, topic)
	}
	var ps []*pq
	for q, p := range m.mu.pqs {
		if q.Topic == topic {
			ps = append(ps, p)
		}
	}
	want := make([]bool, len(ps))
	for i, p := range ps {
		want[i] = m.pausedLocked(p.q)
	}
	m.mu.Unlock()
	for i, p := range ps {
		p.setPaused(want[i])
	}
	return nil
}

// pausedLocked says whether q is paused by the member's pause state.
func (m *member) pausedLocked(q Queue) bool {
	s := m.mu.paused[q.Topic]
	return s != nil && s.has(q.ID)
}

// setPaused pauses or resumes p. Resuming announces the batches p holds
// on the work queue and wakes its fetcher.
func (p *pq) setPaused(on bool) {
	m := p.m
	p.mu.Lock()
	if p.mu.paused == on {
		p.mu.Unlock()
		return
	}
	p.mu.paused = on
	tokens := 0
	if !on && p.consumableLocked() {
		switch {
		case m.o.Orderly:
			// A task still running or suspended goes on by itself.
			if !p.mu.consuming && p.mu.msgs.len() > 0 {
				p.mu.consuming = true
				tokens = 1
			}
		default:
			tokens = len(p.mu.retry) + (p.mu.msgs.len()+m.o.ConsumeBatchSize-1)/m.o.ConsumeBatchSize
		}
		p.spaceLocked()
	}
	p.mu.Unlock()
	if m.work != nil {
		m.work.push(p, tokens)
	}
}

// Unsubscribe stops consuming topic: the consumer gives its queues back
// (running handler calls finish and are committed first) and the group
// rebalances them over its other members that subscribe to the topic. It
// is persisted in the group's config (GroupsFile): when no other live
// member subscribes to the topic, the group's subscription to it is
// removed, so no member restoring the group's subscriptions at Start gets
// it again; when others do, the topic is recorded as unsubscribed for this
// consumer's Options.InstanceName, which a member of that name restoring
// subscriptions leaves out (a consumer without an InstanceName has no
// name to remember it by). A later Subscribe of the topic by a member of
// that name before its Start undoes it. A pause of the topic ends with it.
//
// Errors, which change nothing: ErrInvalidArgument for a topic the
// consumer does not subscribe to (the retry topic included) or a consumer
// not started; ErrClosed after Shutdown or Close; an ErrIO or ErrDiskFull
// when the group's config cannot be written.
func (c *PushConsumer) Unsubscribe(topic string) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.unsubscribe(topic)
}

func (m *member) unsubscribe(topic string) error {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if err := m.checkRunning("unsubscribe"); err != nil {
		return err
	}
	m.mu.Lock()
	s := m.mu.subs[topic]
	if s == nil {
		m.mu.Unlock()
		return fmt.Errorf("mqlite/consumer: unsubscribe: topic %q is not subscribed by this consumer: %w", topic, ErrInvalidArgument)
	}
	delete(m.mu.subs, topic)
	pause := m.mu.paused[topic]
	delete(m.mu.paused, topic)
	m.mu.Unlock()
	if err := m.g.unsubscribe(m, topic); err != nil {
		m.mu.Lock()
		m.mu.subs[topic] = s
		if pause != nil {
			if m.mu.paused == nil {
				m.mu.paused = map[string]*pauseSet{}
			}
			m.mu.paused[topic] = pause
		}
		m.mu.Unlock()
		return err
	}
	m.g.rebalance()
	m.reconcile()
	return nil
}

// subscribes says whether m subscribes to topic.
func (m *member) subscribes(topic string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.subs[topic] != nil
}

// unsubscribe records that m no longer subscribes to topic and persists
// the group's config; on failure the record is left as it was.
func (g *group) unsubscribe(m *member, topic string) error {
	g.mu.Lock()
	if g.mu.members[m.id] != m {
		g.mu.Unlock()
		return ErrClosed
	}
	old := g.mu.rec
	r := old.clone()
	others := false
	for _, o := range g.mu.members {
		others = others || o != m && !o.isManual() && o.subscribes(topic)
	}
	if others {
		if name := m.o.InstanceName; name != "" {
			r.Unsubscribed = withUnsubscribed(r.Unsubscribed, name, topic)
		}
	} else {
		r.Subscriptions = slices.DeleteFunc(r.Subscriptions, func(s Subscription) bool { return s.Topic == topic })
		r.Unsubscribed = withoutTopic(r.Unsubscribed, func(string, string) bool { return true }, topic)
	}
	g.mu.rec = r
	g.mu.Unlock()
	if err := g.mgr.saveGroups(); err != nil {
		g.mu.Lock()
		g.mu.rec = old
		g.mu.Unlock()
		return err
	}
	return nil
}

// unsubRecord is a member's record of the group's topics it unsubscribed
// from while other members kept them (see PushConsumer.Unsubscribe).
type unsubRecord struct {
	Instance string   `json:"instance"`
	Topics   []string `json:"topics"`
}

// withUnsubscribed returns recs with topic added for instance (sorted).
func withUnsubscribed(recs []unsubRecord, instance, topic string) []unsubRecord {
	out := slices.Clone(recs)
	for i := range out {
		if out[i].Instance == instance {
			if !slices.Contains(out[i].Topics, topic) {
				out[i].Topics = append(slices.Clone(out[i].Topics), topic)
				slices.Sort(out[i].Topics)
			}
			return out
		}
	}
	out = append(out, unsubRecord{Instance: instance, Topics: []string{topic}})
	slices.SortFunc(out, func(a, b unsubRecord) int { return cmpString(a.Instance, b.Instance) })
	return out
}

// withoutTopic returns recs without topic for the instances match picks,
// dropping records left empty.
func withoutTopic(recs []unsubRecord, match func(instance, topic string) bool, topic string) []unsubRecord {
	var out []unsubRecord
	for _, r := range recs {
		if match(r.Instance, topic) {
			r.Topics = slices.DeleteFunc(slices.Clone(r.Topics), func(t string) bool { return t == topic })
		}
		if len(r.Topics) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// unsubscribedBy returns the topics instance unsubscribed from.
func (r groupRecord) unsubscribedBy(instance string) map[string]bool {
	out := map[string]bool{}
	if instance == "" {
		return out
	}
	for _, u := range r.Unsubscribed {
		if u.Instance == instance {
			for _, t := range u.Topics {
				out[t] = true
			}
		}
	}
	return out
}

// cloneUnsub deep-copies recs.
func cloneUnsub(recs []unsubRecord) []unsubRecord {
	out := slices.Clone(recs)
	for i := range out {
		out[i].Topics = slices.Clone(out[i].Topics)
	}
	return out
}
