package consumer

import (
	"context"
	"errors"
	"fmt"
)

// start joins the group and starts the control goroutine; startWorkers
// (push) starts the handler pool first.
func (m *member) start(startWorkers func()) error {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	state := m.mu.state
	m.mu.Unlock()
	switch state {
	case memberRunning:
		return fmt.Errorf("mqlite/consumer: already started: %w", ErrInvalidArgument)
	case memberStopping, memberClosed:
		return ErrClosed
	}
	g, err := m.mg.groupFor(m.group)
	if err != nil {
		return err
	}
	m.g = g
	m.mu.Lock()
	m.mu.state = memberRunning // from here on setTarget is accepted
	m.mu.Unlock()
	if err := g.join(m); err != nil {
		m.mu.Lock()
		m.mu.state = memberIdle
		m.mu.target = nil
		m.mu.Unlock()
		return err
	}
	if startWorkers != nil {
		startWorkers()
	}
	go m.loop()
	return nil
}

// pqReleased counts a released pq.
func (m *member) pqReleased() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.live--
	if m.mu.live == 0 && m.mu.allReleased != nil {
		close(m.mu.allReleased)
		m.mu.allReleased = nil
	}
}

// released returns a channel closed once every pq has been released.
func (m *member) released() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.live == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if m.mu.allReleased == nil {
		m.mu.allReleased = make(chan struct{})
	}
	return m.mu.allReleased
}

// shutdown stops the member. Graceful (ctx non-nil): stop fetching, let
// running handler calls finish (until ctx ends), commit, leave the group.
// Immediate (ctx nil): cancel the handlers' contexts first. Idempotent.
func (m *member) shutdown(ctx context.Context) error {
	if ctx == nil {
		return m.halt(context.Background(), false)
	}
	return m.halt(ctx, true)
}

// halt is shutdown with the mode explicit: graceful waits for running
// handler calls until ctx ends; otherwise their contexts are cancelled first.
func (m *member) halt(ctx context.Context, graceful bool) error {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	state := m.mu.state
	if state == memberIdle || state == memberRunning {
		m.mu.state = memberStopping
		close(m.closing)
	}
	m.mu.Unlock()
	switch state {
	case memberIdle:
		m.setClosed()
		m.cancel()
		return nil
	case memberStopping, memberClosed:
		return nil
	}
	var err error
	if !graceful {
		m.cancel()
	}
	left := m.g.leave(m)
	m.g.rebalance() // the others start waiting for our queues' locks
	close(m.stop)
	<-m.loopDone
	if graceful {
		select {
		case <-m.released():
		case <-ctx.Done():
			err = ctx.Err()
			m.cancel()
		}
	}
	m.teardown()
	m.setClosed()
	if left {
		m.g.stopped()
	}
	return errors.Join(err, m.mg.persistOffsets())
}

func (m *member) setClosed() {
	m.mu.Lock()
	m.mu.state = memberClosed
	m.mu.Unlock()
}

// close is the immediate shutdown.
func (m *member) close() error { return m.halt(context.Background(), false) }

// teardown stops the goroutines that remain once the control loop exited
// and waits for them. Workers finish the batch they run (its context is
// cancelled by Close), which releases the last queues.
func (m *member) teardown() {
	awaitUnlocked(&m.stepMu) // a Step running for m (its handler's ctx is cancelled) ends first
	if m.work != nil {
		m.work.close()
		m.workers.Wait()
		for i := range m.slots {
			m.slots[i].release()
		}
	}
	if m.delay != nil {
		m.delay.close()
	}
	m.fetchers.Wait()
	m.cancel()
}
