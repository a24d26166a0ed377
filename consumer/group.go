package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/message"
)

// RetryTopicPrefix + group is the group's retry topic (one queue). Every
// clustering member subscribes to it automatically once the store knows it.
const RetryTopicPrefix = "%RETRY%"

// PropRetryTopic is the property in which the retry path keeps a message's
// original topic; consumers put it back into Message.Topic before the
// handler or Poll sees the message.
const PropRetryTopic = "RETRY_TOPIC"

// PropMaxReconsumeTimes is the property SendBack receives with the
// consumer's MaxReconsumeTimes, so the retry path can route a message whose
// ReconsumeTimes reached it straight to the DLQ.
const PropMaxReconsumeTimes = "MAX_RECONSUME_TIMES"

// RetryTopic returns the retry topic of group.
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// Queue names one queue of a topic.
type Queue struct {
	Topic string // the topic
	ID    int    // the queue id, 0..QueueCount-1
}

// String returns "topic:id".
func (q Queue) String() string { return q.Topic + ":" + strconv.Itoa(q.ID) }

// IsRetry reports whether q is a group's retry queue (%RETRY%group), which
// a clustering group's consumers read besides their topics: Assignment
// and the store's ConsumerLag list it along with the topics' queues.
func (q Queue) IsRetry() bool { return strings.HasPrefix(q.Topic, RetryTopicPrefix) }

func (q Queue) compare(o Queue) int {
	if c := cmpString(q.Topic, o.Topic); c != 0 {
		return c
	}
	return q.ID - o.ID
}

// Subscription is a persisted subscription: a topic and its filter's type
// and text (FilterType "" and Expression "*" for "all messages").
type Subscription struct {
	Topic      string `json:"topic"`          // the subscribed topic
	FilterType string `json:"type,omitempty"` // Filter.Type(), "" for no filter
	Expression string `json:"expr"`           // Filter.String(), "*" for no filter
}

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Name string // the group's name
	// Model, Strategy, ConsumeFromWhere, Orderly and MaxReconsumeTimes are
	// the options of the member that joined last (persisted). The store's
	// retry path may use MaxReconsumeTimes as the group's DLQ limit.
	Model             MessageModel
	Strategy          AllocateStrategy
	ConsumeFromWhere  ConsumeFromWhere
	Orderly           bool
	MaxReconsumeTimes int
	// Subscriptions are the group's topics (the retry topic excluded),
	// sorted by topic; they survive restarts.
	Subscriptions []Subscription
	// Members are the live members, sorted by ID.
	Members []MemberInfo
}

// MemberInfo describes a live member of a group.
type MemberInfo struct {
	// ID is the InstanceName, or a generated name.
	ID string
	// Pull is true for a PullConsumer, false for a PushConsumer.
	Pull bool
	// Manual is true for a pull consumer with manually assigned queues
	// (it takes no part in rebalancing).
	Manual bool
	// Queues are the queues the group assigned to the member, sorted.
	Queues []Queue
}

// groupRecord is a group's persisted config (one element of GroupsFile).
type groupRecord struct {
	Name               string         `json:"name"`
	Model              string         `json:"model"` // "" until a member joined
	Strategy           string         `json:"strategy"`
	ConsumeFromWhere   string         `json:"consumeFromWhere"`
	ConsumeTimestampMs int64          `json:"consumeTimestampMs,omitempty"`
	Orderly            bool           `json:"orderly,omitempty"`
	MaxReconsumeTimes  int            `json:"maxReconsumeTimes"`
	Subscriptions      []Subscription `json:"subscriptions"`
	// Unsubscribed: per InstanceName, topics of Subscriptions that member
	// unsubscribed from while other members kept them (GroupsVersion 2).
	Unsubscribed []unsubRecord `json:"unsubscribed,omitempty"`
}

type groupsBody struct {
	Groups []groupRecord `json:"groups"`
}

func (r groupRecord) clone() groupRecord {
	r.Subscriptions = slices.Clone(r.Subscriptions)
	r.Unsubscribed = cloneUnsub(r.Unsubscribed)
	return r
}

func parseEnum[T ~uint8](s string, last T, name func(T) string) (T, bool) {
	for v := T(0); v <= last; v++ {
		if name(v) == s {
			return v, true
		}
	}
	return 0, false
}

func (r groupRecord) check() error {
	if err := validName(r.Name); err != nil {
		return fmt.Errorf("name %q: %v", r.Name, err)
	}
	if _, ok := parseEnum(r.Model, Broadcasting, MessageModel.String); !ok {
		return fmt.Errorf("group %s: unknown model %q", r.Name, r.Model)
	}
	if _, ok := parseEnum(r.Strategy, ConsistentHash, AllocateStrategy.String); !ok {
		return fmt.Errorf("group %s: unknown strategy %q", r.Name, r.Strategy)
	}
	if _, ok := parseEnum(r.ConsumeFromWhere, ConsumeFromTimestamp, ConsumeFromWhere.String); !ok {
		return fmt.Errorf("group %s: unknown consumeFromWhere %q", r.Name, r.ConsumeFromWhere)
	}
	if r.MaxReconsumeTimes < 0 || r.MaxReconsumeTimes > maxReconsumeTimes {
		return fmt.Errorf("group %s: maxReconsumeTimes %d outside [0, %d]", r.Name, r.MaxReconsumeTimes, maxReconsumeTimes)
	}
	topics := make(map[string]bool, len(r.Subscriptions))
	for _, s := range r.Subscriptions {
		if err := message.ValidateTopic(s.Topic, message.MaxSysTopicLen); err != nil {
			return fmt.Errorf("group %s: subscription topic %q: %v", r.Name, s.Topic, err)
		}
		if topics[s.Topic] {
			return fmt.Errorf("group %s: two subscriptions to topic %s", r.Name, s.Topic)
		}
		topics[s.Topic] = true
	}
	return r.checkUnsubscribed(topics)
}

// checkUnsubscribed checks r.Unsubscribed: valid instance names, each
// once, and topics among the subscriptions, each once.
func (r groupRecord) checkUnsubscribed(subscribed map[string]bool) error {
	seen := map[string]bool{}
	for _, u := range r.Unsubscribed {
		if err := validName(u.Instance); err != nil {
			return fmt.Errorf("group %s: unsubscribed instance %q: %v", r.Name, u.Instance, err)
		}
		if seen[u.Instance] {
			return fmt.Errorf("group %s: instance %s is listed twice as unsubscribed", r.Name, u.Instance)
		}
		seen[u.Instance] = true
		if len(u.Topics) == 0 {
			return fmt.Errorf("group %s: instance %s unsubscribed no topic", r.Name, u.Instance)
		}
		for i, t := range u.Topics {
			if !subscribed[t] || slices.Contains(u.Topics[:i], t) {
				return fmt.Errorf("group %s: instance %s unsubscribed %q, not a subscription or listed twice", r.Name, u.Instance, t)
			}
		}
	}
	return nil
}

// group is one consumer group: its live members, config, queue locks.
type group struct {
	mgr        *Manager
	name       string
	retryTopic string
	// retryKnown says the last rebalance found the retry topic.
	retryKnown atomic.Bool
	// rebalanceMu serialises rebalance computations, so an older one never
	// overwrites a newer one's targets. Taken before mu.
	rebalanceMu sync.Mutex

	mu struct {
		sync.Mutex
		rec     groupRecord
		members map[string]*member
		// locks: queue -> the pq holding it (clustering only).
		locks map[Queue]*pq
		seq   int
		// counts is each topic's queue count at the last rebalance;
		// grown holds the queues added to a topic since the group
		// first saw it.
		counts map[string]int
		grown  map[Queue]bool
		// stopping counts the members that left but whose shutdown has
		// not finished: their handlers may still commit.
		stopping int
	}
}

func newGroup(mg *Manager, rec groupRecord) *group {
	g := &group{mgr: mg, name: rec.Name, retryTopic: RetryTopic(rec.Name)}
	g.mu.rec = rec
	g.mu.members = map[string]*member{}
	g.mu.locks = map[Queue]*pq{}
	g.mu.counts = map[string]int{}
	g.mu.grown = map[Queue]bool{}
	return g
}

// info describes the group; false if it has neither members nor a record.
func (g *group) info() (GroupInfo, bool) {
	g.mu.Lock()
	r := g.mu.rec.clone()
	members := make([]*member, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		members = append(members, m)
	}
	g.mu.Unlock()
	if r.Model == "" && len(members) == 0 {
		return GroupInfo{}, false
	}
	gi := GroupInfo{Name: g.name, MaxReconsumeTimes: r.MaxReconsumeTimes, Orderly: r.Orderly, Subscriptions: r.Subscriptions}
	gi.Model, _ = parseEnum(r.Model, Broadcasting, MessageModel.String)
	gi.Strategy, _ = parseEnum(r.Strategy, ConsistentHash, AllocateStrategy.String)
	gi.ConsumeFromWhere, _ = parseEnum(r.ConsumeFromWhere, ConsumeFromTimestamp, ConsumeFromWhere.String)
	for _, m := range members {
		gi.Members = append(gi.Members, MemberInfo{ID: m.id, Pull: m.kind == kindPull, Manual: m.isManual(), Queues: m.targetQueues()})
	}
	slices.SortFunc(gi.Members, func(a, b MemberInfo) int { return cmpString(a.ID, b.ID) })
	return gi, true
}

func (g *group) liveMembers() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*member, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return cmpString(a.id, b.id) })
	return out
}

// join registers m (assigning its id) and records the group's config and
// subscriptions, persisting them. Live members must agree on the model and
// the strategy.
func (g *group) join(m *member) error {
	subs := m.subscriptions()
	g.mu.Lock()
	if g.mgr.closing.Load() {
		g.mu.Unlock()
		return ErrClosed
	}
	for _, o := range g.mu.members {
		if o.o.Model != m.o.Model {
			g.mu.Unlock()
			return fmt.Errorf("mqlite/consumer: group %s: model %s, but live members use %s: %w", g.name, m.o.Model, o.o.Model, ErrInvalidArgument)
		}
		if o.o.Model == Clustering && o.o.Strategy != m.o.Strategy {
			g.mu.Unlock()
			return fmt.Errorf("mqlite/consumer: group %s: strategy %s, but live members use %s: %w", g.name, m.o.Strategy, o.o.Strategy, ErrInvalidArgument)
		}
	}
	id := m.o.InstanceName
	if id == "" {
		g.mu.seq++
		id = fmt.Sprintf("instance-%06d", g.mu.seq)
		for g.mu.members[id] != nil {
			g.mu.seq++
			id = fmt.Sprintf("instance-%06d", g.mu.seq)
		}
	}
	if g.mu.members[id] != nil {
		g.mu.Unlock()
		return fmt.Errorf("mqlite/consumer: group %s already has a live member named %q: %w", g.name, id, ErrInvalidArgument)
	}
	m.id = id
	m.idPub.Store(&id)
	old := g.mu.rec
	g.mu.members[id] = m
	g.mu.rec = g.recordLocked(m, subs)
	g.mu.Unlock()
	if err := g.mgr.saveGroups(); err != nil {
		g.mu.Lock()
		delete(g.mu.members, id)
		g.mu.rec = old
		g.mu.Unlock()
		m.idPub.Store(nil)
		return err
	}
	return nil
}

// recordLocked is the group's record after m joined or changed its
// subscriptions: m's options, and the union of the subscriptions (m's win
// for a topic they share).
func (g *group) recordLocked(m *member, subs []*subscription) groupRecord {
	r := groupRecord{
		Name: g.name, Model: m.o.Model.String(), Strategy: m.o.Strategy.String(),
		ConsumeFromWhere: m.o.ConsumeFromWhere.String(), Orderly: m.o.Orderly, MaxReconsumeTimes: m.o.MaxReconsumeTimes,
	}
	if m.o.ConsumeFromWhere == ConsumeFromTimestamp {
		r.ConsumeTimestampMs = m.o.ConsumeTimestamp.UnixMilli()
	}
	all := map[string]Subscription{}
	for _, s := range g.mu.rec.Subscriptions {
		all[s.Topic] = s
	}
	for _, s := range subs {
		if !s.retry {
			all[s.topic] = s.record()
		}
	}
	for _, s := range all {
		r.Subscriptions = append(r.Subscriptions, s)
	}
	r.Unsubscribed = cloneUnsub(g.mu.rec.Unsubscribed)
	if name := m.o.InstanceName; name != "" {
		for _, s := range subs {
			// m subscribes to it again: no longer unsubscribed.
			r.Unsubscribed = withoutTopic(r.Unsubscribed, func(inst, _ string) bool { return inst == name }, s.topic)
		}
	}
	slices.SortFunc(r.Subscriptions, func(a, b Subscription) int { return cmpString(a.Topic, b.Topic) })
	return r
}

// subscriptionsChanged records m's new subscriptions and persists them.
func (g *group) subscriptionsChanged(m *member) error {
	subs := m.subscriptions()
	g.mu.Lock()
	if g.mu.members[m.id] != m {
		g.mu.Unlock()
		return nil
	}
	g.mu.rec = g.recordLocked(m, subs)
	g.mu.Unlock()
	return g.mgr.saveGroups()
}

// leave unregisters m. If it was registered (true), stopped must follow
// once m commits no more.
func (g *group) leave(m *member) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.members[m.id] != m {
		return false
	}
	delete(g.mu.members, m.id)
	g.mu.stopping++
	return true
}

// stopped records that m, which left, no longer commits.
func (g *group) stopped() {
	g.mu.Lock()
	g.mu.stopping--
	g.mu.Unlock()
}

// rebalance computes every member's queues and hands them over. Members
// apply them on their own goroutines; queues move only after their
// previous owner released them (clean handoff).
func (g *group) rebalance() {
	g.rebalanceMu.Lock()
	defer g.rebalanceMu.Unlock()
	members := g.liveMembers()
	strategy := Averagely
	if len(members) > 0 {
		strategy = members[0].o.Strategy
	}
	// topic -> subscribed clustering members (ids), and the queue counts.
	byTopic := map[string][]string{}
	counts := map[string]int{}
	subsOf := make([]map[string]*subscription, len(members))
	for i, m := range members {
		if m.isManual() {
			continue
		}
		subsOf[i] = m.subsMap()
		for t := range subsOf[i] {
			byTopic[t] = append(byTopic[t], m.id)
			counts[t] = 0
		}
	}
	for t := range counts {
		n, err := g.mgr.st.QueueCount(t)
		if t == g.retryTopic {
			g.retryKnown.Store(err == nil)
		}
		switch {
		case err == nil:
			counts[t] = n
		case errors.Is(err, ErrTopicNotFound):
			counts[t] = 0
		default:
			g.mgr.log.Warn("mqlite/consumer: rebalance skipped", "group", g.name, "topic", t, "err", err)
			return
		}
	}
	g.mu.Lock()
	for t, n := range counts {
		if prev := g.mu.counts[t]; prev > 0 && n > prev {
			for q := prev; q < n; q++ {
				g.mu.grown[Queue{t, q}] = true
			}
		}
		g.mu.counts[t] = n
	}
	g.mu.Unlock()
	alloc := map[string]map[string][]int{} // topic -> member -> queue ids
	for t, ids := range byTopic {
		if members[0].o.Model == Clustering {
			alloc[t] = strategy.Allocate(t, counts[t], ids)
		}
	}
	for i, m := range members {
		if subsOf[i] == nil {
			continue
		}
		target := map[Queue]*subscription{}
		for t, s := range subsOf[i] {
			if m.o.Model == Broadcasting {
				for q := range counts[t] {
					target[Queue{t, q}] = s
				}
				continue
			}
			for _, q := range alloc[t][m.id] {
				target[Queue{t, q}] = s
			}
		}
		m.setTarget(target)
	}
}

// grownQueue says q was added to its topic after the group first saw it.
func (g *group) grownQueue(q Queue) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.grown[q]
}

// tryLock gives q's lock to p, unless a live holder keeps it: a holder that
// still owns the queue (active, or pending: it took the lock and is finding
// its start offset), or one draining it for less than LockExpiry. An
// expired holder is revoked (its later commits are ignored). Broadcasting
// and manually assigned queues need no lock.
func (g *group) tryLock(p *pq, now time.Time) bool {
	if p.m.o.Model == Broadcasting || p.m.isManual() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.mu.locks[p.q]
	if h != nil && h != p {
		h.mu.Lock()
		// A pending holder is live too: revoked between taking the lock
		// and starting, it went on to start with no fetcher (it may not
		// consume) and kept the queue from its member for good.
		live := h.mu.state == pqActive || h.mu.state == pqPending ||
			h.mu.state == pqDraining && now.Sub(h.mu.dropAt) < g.mgr.o.LockExpiry
		if !live {
			h.revoked.Store(true)
		}
		h.mu.Unlock()
		if live {
			return false
		}
		g.mgr.log.Warn("mqlite/consumer: queue lock expired; taking it over", "group", g.name, "queue", p.q.String(),
			"from", h.m.id, "to", p.m.id)
	}
	g.mu.locks[p.q] = p
	return true
}

// unlock releases q's lock if p holds it and wakes every member, so one
// waiting for the queue can take it.
func (g *group) unlock(p *pq) {
	g.mu.Lock()
	held := g.mu.locks[p.q] == p
	if held {
		delete(g.mu.locks, p.q)
	}
	members := make([]*member, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		members = append(members, m)
	}
	g.mu.Unlock()
	if held {
		for _, m := range members {
			m.poke()
		}
	}
}

// lockHolder returns the id of the member holding q's lock, or "".
func (g *group) lockHolder(q Queue) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.mu.locks[q]; h != nil {
		return h.m.id
	}
	return ""
}

// unlockQuiet releases q's lock if p holds it, waking nobody (p could not
// start; nobody else was waiting on p's account).
func (g *group) unlockQuiet(p *pq) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.locks[p.q] == p {
		delete(g.mu.locks, p.q)
	}
}
