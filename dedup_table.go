package mqlite

// idTable maps the hashes of (topic, DedupID) to CommitLog offsets: open
// addressing with linear probing and deletion by backward shift, so the
// window's steady churn (one ID in, the oldest out) leaves no tombstones
// to probe past, as a Go map's deletions do. At most half full.
type idTable struct {
	slots []idSlot
	n     int
}

// idSlot is one entry; hash 0 marks an empty slot (a hash of 0 is stored
// as 1: a collision like any other, resolved by reading the record).
type idSlot struct {
	hash uint64
	off  int64
}

func tableHash(h uint64) uint64 { return max(h, 1) }

func (t *idTable) len() int { return t.n }

// get returns the offset stored for h.
func (t *idTable) get(h uint64) (int64, bool) {
	if t.n == 0 {
		return 0, false
	}
	h = tableHash(h)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.slots[i].hash {
		case h:
			return t.slots[i].off, true
		case 0:
			return 0, false
		}
	}
}

// put stores off for h, replacing what was there.
func (t *idTable) put(h uint64, off int64) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	h = tableHash(h)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.slots[i].hash {
		case h:
			t.slots[i].off = off
			return
		case 0:
			t.slots[i] = idSlot{h, off}
			t.n++
			return
		}
	}
}

// del removes h if it still maps to off, shifting the entries after it
// back so that every entry stays reachable from its home slot.
func (t *idTable) del(h uint64, off int64) {
	if t.n == 0 {
		return
	}
	h = tableHash(h)
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for ; t.slots[i].hash != h; i = (i + 1) & mask {
		if t.slots[i].hash == 0 {
			return
		}
	}
	if t.slots[i].off != off {
		return
	}
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
	t.n--
}

func (t *idTable) grow() {
	old := t.slots
	t.slots = make([]idSlot, max(64, 2*len(old)))
	t.n = 0
	for _, s := range old {
		if s.hash != 0 {
			t.put(s.hash, s.off)
		}
	}
}
