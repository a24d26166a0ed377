package consumer

// orderlyBatchesPerTask is how many batches a worker consumes from one
// orderly queue before it puts the queue back at the end of the work queue,
// so that busy queues share the pool fairly (RocketMQ yields after 60 s).
const orderlyBatchesPerTask = 32

// consumeOrderly consumes p's cached messages one batch at a time, in
// order. At most one task per queue exists (pq.consuming), so no two
// handler calls overlap on a queue; the group lock keeps other members
// off it. A failed batch suspends the queue for SuspendInterval and is
// retried locally; after MaxReconsumeTimes retries its messages are sent
// back (the store routes them to the DLQ) and the queue moves on.
func (m *member) consumeOrderly(p *pq, slot int) {
	for range orderlyBatchesPerTask {
		p.mu.Lock()
		if !p.consumableLocked() || p.mu.paused || p.mu.msgs.len() == 0 {
			p.mu.consuming = false
			p.mu.Unlock()
			return
		}
		k := min(m.o.ConsumeBatchSize, p.mu.msgs.len())
		batch := p.mu.msgs.peek(k)
		p.mu.running++
		p.mu.Unlock()

		res := m.call(slot, batch)
		done := k // leading messages of the batch that are finished
		closing := m.ctx.Err() != nil
		if res != ConsumeSuccess {
			done = 0
			if !closing {
				p.mu.Lock()
				p.mu.attempts++
				exhausted := p.mu.attempts > m.o.MaxReconsumeTimes
				p.mu.Unlock()
				if exhausted {
					for _, msg := range batch {
						if err := m.sendBack(m.ctx, msg); err != nil {
							m.log.Warn("mqlite/consumer: orderly send back failed; retrying locally",
								"queue", p.q.String(), "offset", msg.QueueOffset, "err", err)
							break
						}
						done++
					}
				} else {
					for _, msg := range batch {
						msg.ReconsumeTimes++
					}
				}
			}
		}

		p.mu.Lock()
		p.mu.running--
		if done > 0 {
			p.mu.msgs.drop(done) // batch[:done], still at the front: only this task takes from it
			p.uncacheLocked(batch[:done])
			p.commitLocked()
			if done == k {
				p.mu.attempts = 0
			}
		}
		rel := p.mu.state == pqDraining && p.mu.running == 0
		next := done == k && !rel
		if !next {
			// Failed (or closing): the task ends. A suspended queue keeps
			// consuming = true so the fetcher does not start another task
			// before the suspend ends.
			p.mu.consuming = !closing && !rel
		}
		p.mu.Unlock()
		m.release(batch[:done])
		switch {
		case rel:
			p.release()
			return
		case !next && !closing:
			m.delay.after(m.o.SuspendInterval, func() { m.work.push(p, 1) })
			return
		case !next:
			return
		}
	}
	m.work.push(p, 1) // yield; consuming stays true
}
