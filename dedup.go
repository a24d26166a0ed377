package mqlite

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// The dedup window remembers, per topic, the DedupIDs of the messages
// stored in the last Options.DedupWindow (at most Options.DedupMaxIDs of
// them), each with the CommitLog offset of the message that carried it
// first. A send whose (topic, DedupID) is remembered stores nothing and
// returns that message's result, marked Duplicate.
//
// It is memory only: Open rebuilds it from the CommitLog's records of the
// window (the key index is asynchronous, so it cannot be the source). A
// record counts when it carries a DedupID and is a user topic's message:
// stored in its topic, or waiting for its delivery time (a delayed send
// counts under its real topic). A transaction's half message counts only
// once committed: its commit stores the real message. Sends are checked;
// the store's own appends (a delayed message's delivery, a re-drive, a
// commit whose ID another send stored) only add what is not there, so the
// window after a restart equals the one before.
//
// An entry costs its place in the arrival ring (16 bytes) and the slots
// of the ID table (hash and arrival number, 16 bytes; see idTable) that
// it takes, 1.5 to 3 of them: 48 bytes at a power-of-two count, which
// BenchmarkPutDedup measures (B/id).
//
// The cost of a send with an ID is one random access into the table (for
// a new ID, the common case): the slot is prefetched once the send is
// stamped (newRoutedJob) and looked up once the message is validated,
// just before the CommitLog append (claim), with the put's own timestamp
// to expire the window; settle remembers it. Nothing else is
// done to forget an ID: the ring's head moves on, and the table's entry
// is dead from then on (idTable's sweeps).

// DefaultDedupWindow is how long a DedupID is remembered by default, as
// JetStream's default duplicate window.
const DefaultDedupWindow = 2 * time.Minute

// DefaultDedupMaxIDs bounds the remembered DedupIDs by default.
const DefaultDedupMaxIDs = 1 << 18

// dedupRef is one remembered ID in arrival order: the CommitLog offset of
// its message, complemented (negative) when the ID is kept in the extra
// map instead of the table, and its store time.
type dedupRef struct {
	off int64
	ms  int64
}

// dedupWindow is the store's dedup window. Its lock is taken by senders
// that carry a DedupID and by the rebuild; nothing else touches it.
type dedupWindow struct {
	mu     sync.Mutex
	window int64 // ms
	max    int
	ids    idTable          // hash of (topic, DedupID) -> seq, the arrival number
	extra  map[string]int64 // topic "\x00" id -> offset, for a hash another ID holds
	ring   []dedupRef       // arrival order: n entries from head, wrapping
	head   int
	n      int
	seq    uint64 // the arrival number of ring[head]; live seqs are [seq, seq+n)
	// busy holds the hashes of sends in progress: a send of the same
	// hash waits for wake (made when the first waiter comes, closed when a
	// send ends) and looks again.
	busy  []uint64
	wake  chan struct{}
	stats DedupStats
}

// DedupStats describes the dedup window (Stats().Dedup).
type DedupStats struct {
	IDs        int   // DedupIDs remembered now
	Duplicates int64 // sends answered with an earlier send's result
	Evicted    int64 // IDs forgotten before their window ended (DedupMaxIDs)
}

func newDedupWindow(window time.Duration, max int) *dedupWindow {
	if window <= 0 {
		return nil
	}
	return &dedupWindow{window: window.Milliseconds(), max: max}
}

// dedupHash hashes (topic, id): the ID's hash, moved by a multiple of the
// topic's, so that one ID in two topics hashes apart (two short hashes
// cost less than one streamed over both).
func dedupHash(topicName, id string) uint64 {
	return xxhash.Sum64String(id) + xxhash.Sum64String(topicName)*0x9e3779b97f4a7c15
}

// dedupTopic is the topic m's DedupID counts under, or "" when it counts
// nowhere (no ID, a store topic, a half message).
func dedupTopic(m *Message) string {
	if m == nil || m.DedupID == "" || m.SysFlag&message.SysTxTypeMask == message.SysTxPrepared ||
		topic.IsSystem(m.Topic) {
		return ""
	}
	return m.Topic
}

// dedupClaim is a send's DedupID on its way through appendChecked
// (putCheck.claim): checked against the window once the message is
// validated and stamped (claim), stored or answered, then remembered
// (settle).
type dedupClaim struct {
	h    uint64
	name string // the topic the ID counts under
	id   string
	keep bool // remember it once stored (a half message is only checked)
}

// newClaim prepares the dedup check of m, a send with a DedupID, in *c:
// false when m's ID is checked nowhere (a store topic). With the claim in
// its putCheck, appendChecked looks the ID up once m is validated and
// stamped (a remembered ID returns the first send's result, marked
// Duplicate, and stores nothing) and remembers it once stored. Sends of
// the same ID wait for each other, so exactly one of them stores. A half
// message (in topic.Half) is checked against committed ones, but not
// remembered. newRoutedJob prefetches the ID's table slot once it has
// read the clock (a clock read waits for the instructions before it), so
// that the validation runs while the slot's line comes.
func (s *Store) newClaim(m *Message, c *dedupClaim) bool {
	name := m.Topic
	if name == topic.Half { // checked against committed sends, not remembered
		name = m.Properties[message.PropRealTopic]
	}
	if name == "" || topic.IsSystem(name) {
		return false
	}
	keep := name == m.Topic && m.SysFlag&message.SysTxTypeMask != message.SysTxPrepared // dedupTopic(m) == name
	*c = dedupClaim{h: dedupHash(name, m.DedupID), name: name, id: m.DedupID, keep: keep}
	return true
}

// claim checks c's ID for a send stamped nowMs (appendChecked, before the
// append): a remembered ID returns the first send's result, dup true; a
// send of the same ID in progress is waited for. Otherwise c is marked in
// progress until settle.
func (s *Store) claim(ctx context.Context, c *dedupClaim, nowMs int64) (res PutResult, dup bool, err error) {
	w := s.dedup
	w.mu.Lock()
	for {
		w.expire(nowMs)
		if res, ok := w.lookup(s, c.h, c.name, c.id); ok {
			w.stats.Duplicates++
			w.mu.Unlock()
			return res, true, nil
		}
		if !w.isBusy(c.h) {
			break
		}
		if err := w.await(ctx); err != nil {
			return PutResult{}, false, err
		}
	}
	w.busy = append(w.busy, c.h)
	w.mu.Unlock()
	return PutResult{}, false, nil
}

// settle ends a claimed send: remembers its ID when it stored (err nil)
// and wakes the sends that wait for it.
func (s *Store) settle(c *dedupClaim, res PutResult, err error) {
	w := s.dedup
	w.mu.Lock()
	w.unbusy(c.h)
	if err == nil && c.keep {
		w.insert(c.h, c.name, c.id, res.Offset, res.StoreTime.UnixMilli())
		if w.n < len(w.ring) { // the next send's entry, a line the cache has long lost
			prefetch(unsafe.Pointer(&w.ring[w.at(w.n)]))
		}
	}
	w.release()
	w.mu.Unlock()
}

// await waits (w.mu held, released meanwhile) until a send in progress
// ends. On error w.mu is not held.
func (w *dedupWindow) await(ctx context.Context) error {
	if w.wake == nil {
		w.wake = make(chan struct{})
	}
	ch := w.wake
	w.mu.Unlock()
	select {
	case <-ch:
		w.mu.Lock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release wakes the sends waiting for one in progress (w.mu held).
func (w *dedupWindow) release() {
	if w.wake != nil {
		close(w.wake)
		w.wake = nil
	}
}

// remember adds the message just stored at off (append), unless its ID is
// there already.
// A send in progress of the same ID adds its own when it ends.
func (s *Store) remember(name, id string, off, storeMs int64) {
	w := s.dedup
	h := dedupHash(name, id)
	w.mu.Lock()
	if !w.isBusy(h) {
		w.add(s, h, name, id, off, storeMs)
	}
	w.mu.Unlock()
}

// lookup finds a remembered (name, id) and returns its message's result.
// An entry whose record cannot be read (removed by retention, damaged) or
// names another ID (a hash collision) does not match.
func (w *dedupWindow) lookup(s *Store, h uint64, name, id string) (PutResult, bool) {
	if seq, ok := w.ids.get(h, w.seq, w.seq+uint64(w.n)); ok {
		if res, ok := s.dedupResult(w.ring[w.slot(seq)].off, name, id); ok {
			return res, true
		}
	}
	if len(w.extra) > 0 {
		if off, ok := w.extra[name+"\x00"+id]; ok {
			return s.dedupResult(off, name, id)
		}
	}
	return PutResult{}, false
}

func (w *dedupWindow) add(s *Store, h uint64, name, id string, off, ms int64) {
	if _, ok := w.lookup(s, h, name, id); !ok {
		w.insert(h, name, id, off, ms)
	}
}

// insert adds an ID known to be absent, stored at ms: the IDs that are
// older than the window at ms are forgotten first.
func (w *dedupWindow) insert(h uint64, name, id string, off, ms int64) {
	w.expire(ms)
	if w.n == w.max {
		w.stats.Evicted++
		w.pop()
	}
	if _, taken := w.ids.get(h, w.seq, w.seq+uint64(w.n)); taken {
		if w.extra == nil {
			w.extra = map[string]int64{}
		}
		w.extra[name+"\x00"+id] = off
		off = ^off // the ring entry forgets through extra's scan
	} else {
		w.ids.put(h, w.seq+uint64(w.n), w.seq, w.seq+uint64(w.n))
	}
	if w.n == len(w.ring) {
		grown := make([]dedupRef, max(16, min(2*len(w.ring), w.max)))
		k := copy(grown, w.ring[w.head:])
		copy(grown[k:], w.ring[:w.head])
		w.ring, w.head = grown, 0
	}
	w.ring[w.at(w.n)] = dedupRef{off: off, ms: ms}
	w.n++
}

// at is the ring index of the entry i places after the oldest (i at most
// len(w.ring)).
func (w *dedupWindow) at(i int) int {
	if j := w.head + i; j < len(w.ring) {
		return j
	}
	return w.head + i - len(w.ring)
}

// pop forgets the oldest ID: its table entry is dead from now on (see
// idTable), and goes when a probe or a sweep meets it.
func (w *dedupWindow) pop() {
	if r := w.ring[w.head]; r.off < 0 {
		w.forgetExtra(^r.off)
	}
	w.head = w.at(1)
	w.n--
	w.seq++
}

// slot is the ring index of a live seq.
func (w *dedupWindow) slot(seq uint64) int {
	return w.at(int(seq - w.seq))
}

// expire forgets IDs older than the window.
func (w *dedupWindow) expire(nowMs int64) {
	for w.n > 0 && w.ring[w.head].ms < nowMs-w.window {
		w.pop()
	}
}

// forgetExtra removes a collided ID (rare: its hash was taken).
func (w *dedupWindow) forgetExtra(off int64) {
	for k, o := range w.extra {
		if o == off {
			delete(w.extra, k)
		}
	}
}

// dedupResult reads the record at off and returns its PutResult when it
// carries id under topic name.
func (s *Store) dedupResult(off int64, name, id string) (PutResult, bool) {
	var res PutResult
	found := false
	err := s.log.Read(off, func(r commitlog.Record) error {
		v := viewOf(r)
		n, ok := dedupKeyOf(v)
		if !ok || n != name || !bytes.Equal(v.Prop(message.PropDedupID), []byte(id)) {
			return nil
		}
		res = recordResult(r, v)
		found = true
		return nil
	})
	return res, err == nil && found
}

// dedupKeyOf is the topic a stored record's DedupID counts under.
func dedupKeyOf(v message.View) (string, bool) {
	if v.SysFlag()&message.SysTxTypeMask == message.SysTxPrepared {
		return "", false
	}
	name := string(v.Topic())
	if real := v.Prop(message.PropRealTopic); real != nil && (name == topic.Schedule || name == topic.Timer) {
		name = string(real)
	}
	if topic.IsSystem(name) {
		return "", false
	}
	return name, true
}

// recordResult rebuilds the PutResult the send of a stored record got.
func recordResult(r commitlog.Record, v message.View) PutResult {
	uniq, _ := v.KeyProps()
	q, qoff := int(v.QueueID()), v.QueueOffset()
	delayed := false
	if name := string(v.Topic()); name == topic.Schedule || name == topic.Timer {
		q, qoff, delayed = atoiOr(v.Prop(message.PropRealQueueID), q), -1, true
	}
	res := message.NewPutResult(r.Offset, r.Size, q, qoff, time.UnixMilli(v.StoreMs()), string(uniq), nil)
	res.Delayed = delayed
	res.Duplicate = true
	return res
}

func atoiOr(b []byte, def int) int {
	if len(b) == 0 {
		return def
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// rebuildDedup fills the window from the CommitLog's records younger than
// the window, at Open. A record it cannot read ends the rebuild with a
// warning: what it did not reach is not remembered.
func (s *Store) rebuildDedup() {
	w := s.dedup
	if w == nil {
		return
	}
	now := s.nowMs()
	from := s.dedupScanStart(now - w.window)
	_, err := s.log.Scan(from, s.log.WrotePosition(), true, func(r commitlog.Record) error {
		v := viewOf(r)
		if v.StoreMs() < now-w.window {
			return nil
		}
		id := v.Prop(message.PropDedupID)
		if id == nil {
			return nil
		}
		if name, ok := dedupKeyOf(v); ok {
			w.add(s, dedupHash(name, string(id)), name, string(id), r.Offset, v.StoreMs())
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.lossLog.Warn("mqlite: dedup window rebuilt only in part", "err", err)
	}
	w.expire(now)
}

// dedupScanStart is the start of the newest segment whose first record is
// older than cutoff (records are in store-time order), or the log's start.
func (s *Store) dedupScanStart(cutoff int64) int64 {
	segs := s.log.Segments()
	for i := len(segs) - 1; i >= 0; i-- {
		var first int64 = -1
		_ = s.log.Read(segs[i].Start, func(r commitlog.Record) error {
			first = viewOf(r).StoreMs()
			return nil
		})
		if first >= 0 && first < cutoff {
			return segs[i].Start
		}
	}
	return s.log.MinOffset()
}

// sendBatchDedup is the dedup check for a batch: the messages whose IDs are
// remembered (or repeat an earlier message of the batch) are answered
// with their first send's result; the others are stored by store as one
// batch. It waits while another send of one of its IDs is in progress,
// then claims all of them at once, so two batches never wait for each
// other.
func (s *Store) sendBatchDedup(ctx context.Context, msgs []*Message,
	store func([]*Message) ([]PutResult, error)) ([]PutResult, error) {
	w := s.dedup
	hashes := make([]uint64, len(msgs))
	for i, m := range msgs {
		if name := dedupTopic(m); name != "" {
			hashes[i] = dedupHash(name, m.DedupID)
		}
	}
	w.mu.Lock()
	for {
		w.expire(s.nowMs())
		if !w.anyBusy(hashes) {
			break
		}
		if err := w.await(ctx); err != nil {
			return nil, err
		}
	}
	res := make([]PutResult, len(msgs))
	first := map[uint64]int{}
	var keep []*Message
	var at []int
	for i, m := range msgs {
		if h := hashes[i]; h != 0 {
			if r, ok := w.lookup(s, h, m.Topic, m.DedupID); ok {
				res[i] = r
				w.stats.Duplicates++
				continue
			}
			if j, ok := first[h]; ok && msgs[j].Topic == m.Topic && msgs[j].DedupID == m.DedupID {
				res[i] = PutResult{Offset: -1 - int64(j)} // j's result, below
				w.stats.Duplicates++
				continue
			}
			first[h] = i
		}
		keep = append(keep, m)
		at = append(at, i)
	}
	if len(keep) == 0 {
		w.mu.Unlock()
		return res, nil
	}
	for h := range first {
		w.busy = append(w.busy, h)
	}
	w.mu.Unlock()
	stored, err := store(keep)
	w.mu.Lock()
	for h, i := range first {
		w.unbusy(h)
		if err == nil {
			k := slices.Index(at, i)
			w.insert(h, msgs[i].Topic, msgs[i].DedupID, stored[k].Offset, stored[k].StoreTime.UnixMilli())
		}
	}
	w.release()
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		res[i] = stored[k]
	}
	for i := range res {
		if res[i].Offset < 0 {
			res[i] = res[-1-res[i].Offset]
			res[i].Duplicate = true
		}
	}
	return res, nil
}

func anyDedupID(msgs []*Message) bool {
	for _, m := range msgs {
		if m != nil && m.DedupID != "" {
			return true
		}
	}
	return false
}

// anyBusy says whether a send in progress holds one of hashes.
func (w *dedupWindow) anyBusy(hashes []uint64) bool {
	for _, h := range hashes {
		if h != 0 && w.isBusy(h) {
			return true
		}
	}
	return false
}

// rememberBatch adds the IDs of a batch just stored.
func (s *Store) rememberBatch(msgs []*Message, res []PutResult) {
	for i, m := range msgs {
		if name := dedupTopic(m); name != "" {
			s.remember(name, m.DedupID, res[i].Offset, res[i].StoreTime.UnixMilli())
		}
	}
}

// send is append for a sender: a message with a DedupID is checked
// against the dedup window (newClaim).
func (s *Store) send(ctx context.Context, m *Message, queue int, sys, validated bool) (PutResult, error) {
	c := putCheck{sys: sys, validated: validated}
	var claim dedupClaim
	if s.dedup != nil && m != nil && m.DedupID != "" && s.newClaim(m, &claim) {
		c.claim = &claim
	}
	return s.appendChecked(ctx, m, queue, c)
}

// sendBatch is appendBatch for a sender, checked against the window.
func (s *Store) sendBatch(ctx context.Context, msgs []*Message, queue int, validated bool) ([]PutResult, error) {
	return s.sendBatchInto(ctx, msgs, queue, validated, nil)
}

// sendBatchInto is sendBatch with the results in dst's memory when it has
// room and no message carries a DedupID.
func (s *Store) sendBatchInto(ctx context.Context, msgs []*Message, queue int, validated bool, dst []PutResult) ([]PutResult, error) {
	if s.dedup == nil || !anyDedupID(msgs) {
		return s.appendBatchInto(ctx, msgs, queue, validated, dst)
	}
	return s.sendBatchDedup(ctx, msgs, func(keep []*Message) ([]PutResult, error) {
		return s.appendBatch(ctx, keep, queue, validated)
	})
}

func (s *Store) dedupStats() DedupStats {
	w := s.dedup
	if w == nil {
		return DedupStats{}
	}
	now := s.nowMs()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	st := w.stats
	st.IDs = w.n
	return st
}

// isBusy says whether a send of hash h is in progress (a few at most: a
// scan beats a map).
func (w *dedupWindow) isBusy(h uint64) bool {
	for _, b := range w.busy {
		if b == h {
			return true
		}
	}
	return false
}

// unbusy ends one send of hash h.
func (w *dedupWindow) unbusy(h uint64) {
	for i, b := range w.busy {
		if b == h {
			w.busy[i] = w.busy[len(w.busy)-1]
			w.busy = w.busy[:len(w.busy)-1]
			return
		}
	}
}
