package consumer

// This file answers the store's Settle: whether every consumer has done
// all the work due at the clock's current time.

// Activity counts what the consumers have done: pulls that delivered or
// moved a fetch position, and handler runs the live push consumers
// finished. The store's Settle compares it across a round to see that
// nothing moved (a consumer closing changes it too: another round).
func (mg *Manager) Activity() uint64 {
	n := mg.activity.Load()
	for _, g := range mg.groupList() {
		for _, m := range g.liveMembers() {
			if m.work != nil {
				n += m.work.doneCount()
			}
		}
	}
	return n
}

// Idle reports whether every live consumer has nothing to do at the
// clock's current time: each has every assigned queue taken, has fetched
// each to its end (a pull consumer whose cache is full waits for Poll), and
// a push consumer has run its handler on everything fetched and has no
// local redelivery due. A fetch backing off after a failure, a suspended
// orderly queue and a redelivery due later are idle: they wait for the
// clock. A snapshot: Settle calls it until a whole round changes nothing.
func (mg *Manager) Idle() bool {
	for _, g := range mg.groupList() {
		for _, m := range g.liveMembers() {
			if !m.idle() {
				return false
			}
		}
	}
	return true
}

func (m *member) idle() bool {
	if m.work != nil && !m.work.idle() {
		return false
	}
	if m.delay != nil && m.delay.due() {
		return false
	}
	m.mu.Lock()
	if m.mu.state != memberRunning {
		m.mu.Unlock()
		return true
	}
	for q := range m.mu.target {
		if _, ok := m.mu.pqs[q]; !ok {
			m.mu.Unlock()
			return false
		}
	}
	list := make([]*pq, 0, len(m.mu.pqs))
	for _, p := range m.mu.pqs {
		list = append(list, p)
	}
	m.mu.Unlock()
	for _, p := range list {
		if !p.idle() {
			return false
		}
	}
	return true
}

// idle reports whether p has nothing to do now (see Manager.Idle).
func (p *pq) idle() bool {
	m := p.m
	p.mu.Lock()
	state, next, running := p.mu.state, p.mu.next, p.mu.running
	cached, retries, consuming, fetchErr := p.mu.msgs.len(), len(p.mu.retry), p.mu.consuming, p.mu.fetchErr
	paused := p.mu.paused
	room := 1
	if m.kind == kindPull {
		room = p.roomLocked()
	}
	p.mu.Unlock()
	switch {
	case state == pqReleased:
		return true
	case state != pqActive, running > 0:
		return false
	case paused:
		return true // waits for Resume
	case retries > 0:
		return false
	case m.kind == kindPush && cached > 0 && !(m.o.Orderly && consuming):
		return false
	case fetchErr != nil, room == 0:
		return true // backing off on the clock, or waiting for Poll
	}
	end, err := m.st.MaxOffset(p.q.Topic, p.q.ID)
	return err != nil || next >= end
}

// empty reports whether no token waits on the queue.
func (w *workQueue) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.head == len(w.mu.items) && w.mu.busy == 0 && len(w.mu.ready) == 0
}

// doneCount is how many tokens the workers have finished.
func (w *workQueue) doneCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.done
}

// due reports whether an item is due at the clock's current time, or
// being run.
func (d *delayer) due() bool {
	now := d.clk.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.firing > 0 || (len(d.mu.items) > 0 && !d.mu.items[0].at.After(now))
}

// TopicsChanged tells the manager that a topic was created or gained
// queues: every group rebalances now, rather than at its next
// RebalanceInterval, so a consumer subscribed to a topic before it
// existed gets its queues at once.
func (mg *Manager) TopicsChanged() {
	if mg.isClosed() {
		return
	}
	for _, g := range mg.groupList() {
		g.rebalance()
	}
}
