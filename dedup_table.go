package mqlite

import (
	"sync/atomic"
	"unsafe"
)

// idTable maps the hashes of (topic, DedupID) to the arrival number (seq)
// of the send that carried them; the window's ring holds, by seq, the
// CommitLog offset. Open addressing with linear probing: an entry whose
// seq the ring no longer holds is dead, and is deleted (by backward
// shift, leaving no tombstone) when a probe passes it or by a sweep once
// a quarter of the slots are dead. So forgetting the oldest ID, once per
// send in the window's steady state, touches no slot: a lookup, one
// random access, is all a new ID costs the table.
type idTable struct {
	slots []idSlot
	used  int // slots holding an entry, live or dead
	// shown is slots as a sender may see it without the lock, to
	// prefetch the slot it is about to look up (replaced when it grows).
	shown atomic.Pointer[[]idSlot]
}

// idSlot is one entry; hash 0 marks an empty slot (a hash of 0 is stored
// as 1: a collision like any other, resolved by reading the record).
type idSlot struct {
	hash uint64
	seq  uint64
}

func tableHash(h uint64) uint64 { return max(h, 1) }

// prefetch starts bringing the home slot of h into the cache, so that a
// lookup a few hundred nanoseconds later finds it there: a new ID's slot
// is a random place in a table of many megabytes, a cache (and often a
// TLB) miss that would otherwise stall the lookup. Safe without the lock:
// it reads the published slice, and a prefetch reads nothing.
func (t *idTable) prefetch(h uint64) {
	if p := t.shown.Load(); p != nil {
		slots := *p
		prefetch(unsafe.Pointer(&slots[tableHash(h)&uint64(len(slots)-1)]))
	}
}

// get returns the seq of the live entry for h (live: seq in [lo, hi)),
// deleting the dead entries its probe meets.
func (t *idTable) get(h uint64, lo, hi uint64) (uint64, bool) {
	if t.used == 0 {
		return 0, false
	}
	h = tableHash(h)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; {
		s := t.slots[i]
		switch {
		case s.hash == 0:
			return 0, false
		case (s.seq < lo || s.seq >= hi):
			t.delete(i) // slot i now holds what followed, or nothing
		case s.hash == h:
			return s.seq, true
		default:
			i = (i + 1) & mask
		}
	}
}

// put adds an entry for h, which has no live one: at the first empty slot
// of its probe (get has deleted the dead ones on the way).
func (t *idTable) put(h, seq uint64, lo, hi uint64) {
	if 4*(t.used+1) > 3*len(t.slots) {
		t.sweep(lo, hi)
		if 3*(t.used+1) > 2*len(t.slots) { // still two-thirds full of live ones
			t.grow(lo, hi)
		}
	}
	h = tableHash(h)
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = idSlot{h, seq}
	t.used++
}

// delete empties slot i, shifting the entries after it back so that every
// entry stays reachable from its home slot.
func (t *idTable) delete(i uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (i + 1) & mask; t.slots[j].hash != 0; j = (j + 1) & mask {
		home := t.slots[j].hash & mask
		// j's entry may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = idSlot{}
	t.used--
}

// sweep deletes every dead entry: one pass over the slots, in order.
func (t *idTable) sweep(lo, hi uint64) {
	for i := range t.slots {
		for t.slots[i].hash != 0 && (t.slots[i].seq < lo || t.slots[i].seq >= hi) {
			t.delete(uint64(i))
		}
	}
}

// grow doubles the table, keeping the live entries.
func (t *idTable) grow(lo, hi uint64) {
	old := t.slots
	t.slots = make([]idSlot, max(64, 2*len(old)))
	slots := t.slots
	t.shown.Store(&slots)
	t.used = 0
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.hash != 0 && s.seq >= lo && s.seq < hi {
			i := s.hash & mask
			for t.slots[i].hash != 0 {
				i = (i + 1) & mask
			}
			t.slots[i] = s
			t.used++
		}
	}
}
