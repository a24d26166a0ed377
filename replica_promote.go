package mqlite

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
)

// Promote makes a replica the primary (manual failover; choosing which
// replica, and making sure the old primary takes no more sends, is the
// caller's). It stops ReplicateFrom, dispatches everything received,
// starts a new epoch at the CommitLog's end, and starts the delay
// scheduler, the timer and transaction services and the consumer groups
// from the metadata the primary last sent: sends are taken from then on.
// Call it with no other call on the Store in flight. On a primary it
// returns ErrInvalidArgument; after Close, ErrClosed.
func (s *Store) Promote() error {
	if s == nil {
		return errs.NilReceiver("mqlite.Store")
	}
	if s.closed.Load() {
		return errs.ErrClosed
	}
	r := &s.repl
	r.mu.Lock()
	if !r.replica.Load() {
		r.mu.Unlock()
		return fmt.Errorf("mqlite: promote: %s is a primary already: %w", s.dir, errs.ErrInvalidArgument)
	}
	f := r.mu.follow
	r.mu.Unlock()
	if f != nil {
		f.cancel()
		<-f.done
	}
	if err := s.settleReceived(); err != nil {
		return err
	}
	if err := r.newEpoch(); err != nil {
		return err
	}
	r.replica.Store(false)
	if err := s.startServices(); err != nil {
		return fmt.Errorf("mqlite: promote: %w", err)
	}
	s.repl.saveState(0)
	s.opts.Logger.Info("mqlite: promoted to primary", "end", s.log.WrotePosition())
	return nil
}

// settleReceived flushes and dispatches everything the replica received
// and sets the next queue offsets and store time from it, as Open does.
func (s *Store) settleReceived() error {
	if _, err := s.log.Flush(); err != nil {
		return fmt.Errorf("mqlite: promote: flush: %w", err)
	}
	d := s.disp
	d.run.Lock()
	err := d.catchUp(s.log.WrotePosition())
	lastStore := d.lastStoreMs
	d.run.Unlock()
	if err != nil {
		return fmt.Errorf("mqlite: promote: dispatch: %w", err)
	}
	var qerr error
	s.log.Locked(func() {
		for _, id := range d.cq.Queues() {
			q, err := d.cq.Queue(id.Topic, id.ID, false)
			if err != nil {
				qerr = err
				return
			}
			s.nextOffsets(id.Topic, int32(id.ID))[id.ID] = q.MaxOffset()
		}
		s.lastStoreMs = max(s.lastStoreMs, lastStore)
	})
	return qerr
}

// newEpoch records a new primary term starting at the CommitLog's end.
func (r *replication) newEpoch() error {
	end := r.s.log.WrotePosition()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := epochState{id: r.mu.epochs.id, epochs: append([]Epoch(nil), r.mu.epochs.epochs...)}
	if e.id.isZero() {
		id, err := newStoreID()
		if err != nil {
			return err
		}
		e.id = id
	}
	if len(e.epochs) == 0 && end > 0 {
		e.epochs = []Epoch{{Number: 1, Start: 0}}
	}
	e.epochs = append(e.epochs, Epoch{Number: e.last().Number + 1, Start: end})
	if err := saveEpochs(r.s.fs, r.s.dir, e); err != nil {
		return err
	}
	r.mu.epochs, r.mu.found = e, true
	return nil
}

// startServices replaces the replica's read-only transaction service and
// consumer groups with writable ones loaded from the followed files, and
// starts the delay scheduler and the timer service afresh from them.
func (s *Store) startServices() error {
	sched, timers, err := s.newDelays()
	if err != nil {
		return err
	}
	tx, err := s.newTxnService()
	if err != nil {
		return err
	}
	cons, err := s.newConsumers()
	if err != nil {
		tx.Close()
		return err
	}
	oldTx, oldCons := s.txn, s.consumers
	s.sched, s.timers, s.txn, s.consumers = sched, timers, tx, cons
	oldTx.Close()
	oldCons.Close()
	if err := s.consumers.ClampOffsets(); err != nil {
		return err
	}
	s.repl.mu.Lock()
	s.repl.mu.services = true
	s.repl.mu.Unlock()
	s.sched.Start()
	s.timers.Start()
	return s.txn.Start()
}
