package consumer

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Manager owns every consumer group of one store: their members, queue
// locks, rebalancing, committed offsets and config files. The root package
// creates one per Store. It is safe for concurrent use.
//
// Lock order: member.startMu or member.pauseMu (never both), then group.rebalanceMu, Manager.mu,
// group.mu, member.mu, pq.mu; persistMu comes after group.mu (an offset
// reset persists holding it); offsetTable.mu and the work queue's and
// delayer's mutexes are leaves. Stepped mode (stepped.go): Manager.stepMu,
// then member.stepMu, come after member.startMu (a shutdown holding it
// waits for member.stepMu) and before every other lock.
type Manager struct {
	st      Source
	o       ManagerOptions
	clk     clock.Clock
	log     *slog.Logger
	offsets *offsetTable

	persistMu   sync.Mutex // serialises writes of OffsetsFile; guards lastOffsets
	lastOffsets []byte
	cfgMu       sync.Mutex // serialises writes of GroupsFile; guards lastGroups
	lastGroups  []byte

	mu struct {
		sync.Mutex
		closed bool
		groups map[string]*group
	}
	// closing is set (before mu.closed) when Close begins; group.join
	// checks it under group.mu, so Close sees every member that joined.
	closing atomic.Bool
	quit    chan struct{}
	done    chan struct{}

	activity atomic.Uint64 // see Activity

	stepMu    sync.Mutex    // held by Step (ManagerOptions.Stepped); Close waits for it
	memberSeq atomic.Uint64 // creation order of members, for Step
}

// NewManager loads the group configs and committed offsets from o.Dir
// (created if missing) and starts the goroutine that persists offsets every
// PersistInterval and rebalances every group every RebalanceInterval. A
// damaged config file fails with an ErrCorrupt naming it. With
// o.ReadOnly it only loads them (a missing directory is no group): no
// goroutine, no write, and new consumers are refused with ErrReadOnly.
func NewManager(st Source, o ManagerOptions) (*Manager, error) {
	o, err := o.withDefaults()
	if st == nil {
		err = errors.Join(err, fmt.Errorf("mqlite/consumer: nil Source: %w", ErrInvalidArgument))
	}
	if err != nil {
		return nil, err
	}
	mg := &Manager{st: st, o: o, clk: o.Clock, log: o.Logger, offsets: newOffsetTable(),
		quit: make(chan struct{}), done: make(chan struct{})}
	mg.mu.groups = map[string]*group{}
	if o.ReadOnly {
		if err := mg.load(); err != nil {
			return nil, err
		}
		close(mg.done) // no loop: nothing to persist or rebalance
		return mg, nil
	}
	if err := o.FS.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("mqlite/consumer: config dir %s: %w", o.Dir, errs.Disk(err))
	}
	if err := mg.load(); err != nil {
		return nil, err
	}
	go mg.loop()
	return mg, nil
}

// load reads both config files.
func (mg *Manager) load() error {
	gb, found, err := readGroups(mg.o.FS, mg.o.Dir)
	if err != nil {
		return fmt.Errorf("mqlite/consumer: load groups: %w", err)
	}
	if found {
		for i, r := range gb.Groups {
			err := r.check()
			if err == nil && mg.mu.groups[r.Name] != nil {
				err = fmt.Errorf("group %s is listed twice", r.Name)
			}
			if err != nil {
				return fmt.Errorf("mqlite/consumer: load groups: %w", corruptAt(mg.o, GroupsFile, "group %d: %v", i, err))
			}
			mg.mu.groups[r.Name] = newGroup(mg, r)
		}
		mg.lastGroups, _ = encodeGroups(gb)
	}
	recs, found, err := loadOffsetsFile(mg.o)
	if err != nil {
		return err
	}
	if found {
		mg.offsets.load(recs)
		mg.lastOffsets, _ = encodeFile(OffsetsMagic, offsetsBody{Offsets: mg.offsets.snapshot("")})
	}
	return nil
}

// loadOffsetsFile reads and checks OffsetsFile; found is false when there is
// none.
func loadOffsetsFile(o ManagerOptions) (recs []offsetRecord, found bool, err error) {
	var ob offsetsBody
	found, err = readConfig(o.FS, o.Dir, OffsetsFile, OffsetsMagic, &ob)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("mqlite/consumer: load offsets: %w", err)
		}
		return nil, false, err
	}
	seen := make(map[offsetKey]bool, len(ob.Offsets))
	for i, r := range ob.Offsets {
		err := r.check()
		if k := r.key(); err == nil && seen[k] {
			err = errors.New("a second offset for the same group, instance and queue")
		} else {
			seen[k] = true
		}
		if err != nil {
			return nil, false, fmt.Errorf("mqlite/consumer: load offsets: %w", corruptAt(o, OffsetsFile, "record %d: %+v is invalid: %v", i, r, err))
		}
	}
	return ob.Offsets, true, nil
}

// CommittedOffsets reads OffsetsFile from o.FS and o.Dir, as NewManager
// does, and returns per queue the highest offset any group (or
// broadcasting member) committed; an empty map when there is none. A
// store calls it at Open, before its queues take puts: a queue holding
// fewer entries than were committed on it lost entries, which a
// re-dispatch of the whole CommitLog rebuilds.
func CommittedOffsets(o ManagerOptions) (map[Queue]int64, error) {
	recs, _, err := loadOffsetsFile(o)
	if err != nil {
		return nil, err
	}
	out := make(map[Queue]int64)
	for _, r := range recs {
		q := Queue{r.Topic, r.Queue}
		out[q] = max(out[q], r.Offset)
	}
	return out, nil
}

// loop persists offsets and rebalances on the clock until Close.
func (mg *Manager) loop() {
	defer close(mg.done)
	persist := mg.clk.NewTicker(mg.o.PersistInterval)
	defer persist.Stop()
	rebalance := mg.clk.NewTicker(mg.o.RebalanceInterval)
	defer rebalance.Stop()
	for {
		select {
		case <-mg.quit:
			return
		case <-persist.C():
			if err := mg.persistOffsets(); err != nil {
				mg.log.Warn("mqlite/consumer: persist offsets", "err", err)
			}
		case <-rebalance.C():
			for _, g := range mg.groupList() {
				g.rebalance()
			}
		}
	}
}

// groupList returns the groups, sorted by name.
func (mg *Manager) groupList() []*group {
	mg.mu.Lock()
	out := make([]*group, 0, len(mg.mu.groups))
	for _, g := range mg.mu.groups {
		out = append(out, g)
	}
	mg.mu.Unlock()
	slices.SortFunc(out, func(a, b *group) int { return cmpString(a.name, b.name) })
	return out
}

// lookup returns the named group, or ErrGroupNotFound.
func (mg *Manager) lookup(name string) (*group, error) { return mg.findGroup(name, false) }

// groupFor returns the named group, creating it (unpersisted until a
// member joins) if needed.
func (mg *Manager) groupFor(name string) (*group, error) { return mg.findGroup(name, true) }

// findGroup returns the named group, creating it when create is true (else
// ErrGroupNotFound); ErrClosed once the manager is closed.
func (mg *Manager) findGroup(name string, create bool) (*group, error) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if mg.mu.closed {
		return nil, ErrClosed
	}
	g := mg.mu.groups[name]
	switch {
	case g != nil:
	case create:
		g = newGroup(mg, groupRecord{Name: name})
		mg.mu.groups[name] = g
	default:
		return nil, fmt.Errorf("mqlite/consumer: group %q: %w", name, ErrGroupNotFound)
	}
	return g, nil
}

// persistOffsets writes OffsetsFile if the offsets changed since the last
// write.
func (mg *Manager) persistOffsets() error {
	mg.persistMu.Lock()
	defer mg.persistMu.Unlock()
	return mg.writeIfChanged(OffsetsFile, OffsetsMagic, offsetsBody{Offsets: mg.offsets.snapshot("")}, &mg.lastOffsets)
}

// writeIfChanged writes name unless its encoding equals *last.
func (mg *Manager) writeIfChanged(name string, magic uint32, v any, last *[]byte) error {
	b, err := encodeFile(magic, v)
	if err != nil {
		return err
	}
	return mg.writeBytesIfChanged(name, b, last)
}

// writeBytesIfChanged writes b to name unless it equals *last.
func (mg *Manager) writeBytesIfChanged(name string, b []byte, last *[]byte) error {
	if bytes.Equal(b, *last) {
		return nil
	}
	if err := vfs.WriteFileAtomic(mg.o.FS, mg.o.Dir, name, b); err != nil {
		return fmt.Errorf("mqlite/consumer: write %s: %w", name, errs.Disk(err))
	}
	*last = b
	return nil
}

// saveGroups writes GroupsFile if any group's record changed.
func (mg *Manager) saveGroups() error {
	mg.cfgMu.Lock()
	defer mg.cfgMu.Unlock()
	var body groupsBody
	for _, g := range mg.groupList() {
		g.mu.Lock()
		r := g.mu.rec
		g.mu.Unlock()
		if r.Model == "" { // never joined: nothing to keep
			continue
		}
		body.Groups = append(body.Groups, r.clone())
	}
	b, err := encodeGroups(body)
	if err != nil {
		return err
	}
	return mg.writeBytesIfChanged(GroupsFile, b, &mg.lastGroups)
}

// ClampOffsets lowers every committed offset past its queue's end (the
// Source's MaxOffset; queues the store does not know are left alone) to
// that end, and persists the offsets if any changed. A store calls it when
// it opens after a power loss, before it takes a put: a crash that cut a
// queue's tail below a committed offset would otherwise leave that offset
// in OffsetsFile until the next persist, and a member starting from it
// after a second crash skips every message stored in between.
func (mg *Manager) ClampOffsets() error {
	if mg.o.ReadOnly {
		return nil
	}
	mg.offsets.mu.Lock()
	cells := maps.Clone(mg.offsets.cells)
	mg.offsets.mu.Unlock()
	changed := false
	for k, c := range cells {
		maxOff, err := mg.st.MaxOffset(k.Topic, k.Queue)
		if err != nil {
			continue // a deleted topic or queue: its offset is kept as it is
		}
		if off := c.v.Load(); off > maxOff {
			mg.log.Warn("mqlite/consumer: committed offset past the queue's end after a crash; moved to the end",
				"group", k.Group, "queue", Queue{k.Topic, k.Queue}.String(), "committed", off, "max", maxOff)
			c.v.Store(maxOff)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return mg.persistOffsets()
}

// PersistOffsets writes the committed offsets now (if they changed).
func (mg *Manager) PersistOffsets() error {
	if mg.isClosed() {
		return ErrClosed
	}
	if mg.o.ReadOnly {
		return fmt.Errorf("mqlite/consumer: persist offsets: %w", ErrReadOnly)
	}
	return mg.persistOffsets()
}

func (mg *Manager) isClosed() bool {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.mu.closed
}

// Close closes every consumer (as their Close does), stops the background
// goroutine and persists the offsets. It is idempotent; afterwards every
// call returns ErrClosed.
func (mg *Manager) Close() error {
	mg.mu.Lock()
	if mg.mu.closed {
		mg.mu.Unlock()
		return nil
	}
	mg.closing.Store(true)
	mg.mu.closed = true
	mg.mu.Unlock()
	var errList []error
	for _, g := range mg.groupList() {
		for _, m := range g.liveMembers() {
			errList = append(errList, m.close())
		}
	}
	close(mg.quit)
	<-mg.done
	awaitUnlocked(&mg.stepMu) // a Step still running sees the members closed and returns
	if !mg.o.ReadOnly {
		errList = append(errList, mg.persistOffsets(), mg.saveGroups())
	}
	return errors.Join(errList...)
}

// Groups describes every group known (live or persisted), sorted by name.
func (mg *Manager) Groups() []GroupInfo {
	var out []GroupInfo
	for _, g := range mg.groupList() {
		if gi, ok := g.info(); ok {
			out = append(out, gi)
		}
	}
	return out
}

// Group describes one group; ErrGroupNotFound if it was never seen.
func (mg *Manager) Group(name string) (GroupInfo, error) {
	g, err := mg.lookup(name)
	if err != nil {
		return GroupInfo{}, err
	}
	gi, ok := g.info()
	if !ok {
		return GroupInfo{}, fmt.Errorf("mqlite/consumer: group %q: %w", name, ErrGroupNotFound)
	}
	return gi, nil
}

// QueueOffset is a committed offset: the next offset the group (or, for
// broadcasting, the instance) consumes from the queue.
type QueueOffset struct {
	Queue
	// Instance is the member's InstanceName for broadcasting groups, else "".
	Instance string
	// Offset is the next offset to consume.
	Offset int64
}

// Offsets returns the committed offsets of group, sorted by instance,
// topic and queue; ErrGroupNotFound if the group was never seen.
func (mg *Manager) Offsets(group string) ([]QueueOffset, error) {
	if _, err := mg.Group(group); err != nil {
		return nil, err
	}
	recs := mg.offsets.snapshot(group)
	out := make([]QueueOffset, len(recs))
	for i, r := range recs {
		out[i] = QueueOffset{Queue: Queue{r.Topic, r.Queue}, Instance: r.Instance, Offset: r.Offset}
	}
	return out, nil
}

// QueueLag is how far a group is behind on one queue.
type QueueLag struct {
	Queue
	// Instance is the member's InstanceName for broadcasting groups, else "".
	Instance string
	// MaxOffset is the queue's next offset (one past the newest message).
	MaxOffset int64
	// Committed is the committed offset, or -1 if the group has none for
	// the queue yet (then Lag counts every stored message).
	Committed int64
	// Lag is MaxOffset - Committed (not below 0).
	Lag int64
}

// String shows every field: "orders:0 lag=3 committed=7 max=10", with
// " instance=name" for a broadcasting member and " (retry)" for the
// group's retry queue. (Without it fmt would print only the embedded
// Queue's String.)
func (l QueueLag) String() string {
	s := fmt.Sprintf("%s lag=%d committed=%d max=%d", l.Queue, l.Lag, l.Committed, l.MaxOffset)
	if l.Instance != "" {
		s += " instance=" + l.Instance
	}
	if l.IsRetry() {
		s += " (retry)"
	}
	return s
}

// Lag reports, for every queue of the group's subscribed topics and every
// queue with a committed offset, the store's max offset minus the committed
// one (RocketMQ's consumer lag). A clustering group's retry queue
// (%RETRY%group) is among them: Queue.IsRetry tells it apart. ErrGroupNotFound if the group was never
// seen; topics the store no longer knows, and queues a topic no longer has
// (it was deleted and created again with fewer), are left out.
func (mg *Manager) Lag(group string) ([]QueueLag, error) {
	gi, err := mg.Group(group)
	if err != nil {
		return nil, err
	}
	offs, _ := mg.Offsets(group)
	type key struct {
		Queue
		inst string
	}
	seen := map[key]int64{}
	var keys []key
	for _, o := range offs {
		k := key{o.Queue, o.Instance}
		seen[k] = o.Offset
		keys = append(keys, k)
	}
	if gi.Model == Clustering {
		for _, s := range gi.Subscriptions {
			n, err := mg.st.QueueCount(s.Topic)
			if err != nil {
				continue
			}
			for q := range n {
				k := key{Queue{s.Topic, q}, ""}
				if _, ok := seen[k]; !ok {
					seen[k] = -1
					keys = append(keys, k)
				}
			}
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmpString(a.inst, b.inst); c != 0 {
			return c
		}
		return a.Queue.compare(b.Queue)
	})
	out := make([]QueueLag, 0, len(keys))
	counts := map[string]int{} // queue count per topic, 0 for one the store no longer knows
	for _, k := range keys {
		n, ok := counts[k.Topic]
		if !ok {
			if n, err = mg.st.QueueCount(k.Topic); err != nil && !errors.Is(err, ErrTopicNotFound) {
				return nil, fmt.Errorf("mqlite/consumer: lag of %s: %w", k.Queue, err)
			}
			counts[k.Topic] = n
		}
		if k.ID >= n {
			// An offset for a queue the topic no longer has (deleted and
			// created again with fewer queues): nothing to lag behind.
			continue
		}
		maxOff, err := mg.st.MaxOffset(k.Topic, k.ID)
		if errors.Is(err, ErrTopicNotFound) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mqlite/consumer: lag of %s: %w", k.Queue, err)
		}
		l := QueueLag{Queue: k.Queue, Instance: k.inst, MaxOffset: maxOff, Committed: seen[k]}
		// Lag counts from the queue's first retained message: what
		// retention or a purge hid is no longer behind.
		minOff, err := mg.st.MinOffset(k.Topic, k.ID)
		if err != nil {
			return nil, fmt.Errorf("mqlite/consumer: lag of %s: %w", k.Queue, err)
		}
		l.Lag = max(maxOff-max(l.Committed, minOff), 0)
		out = append(out, l)
	}
	return out, nil
}

// corruptAt is an ErrCorrupt naming a config file.
func corruptAt(o ManagerOptions, name, format string, args ...any) error {
	return &CorruptError{Path: filepath.Join(o.Dir, name), Offset: headerSize, Reason: fmt.Sprintf(format, args...)}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
