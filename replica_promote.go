package mqlite

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
)

// Promote makes a replica the primary (manual failover; choosing which
// replica, and making sure the old primary takes no more sends, is the
// caller's). It stops ReplicateFrom, dispatches everything received,
// starts the delay scheduler, the timer and transaction services and the
// consumer groups from the metadata the primary last sent, starts a new
// epoch at the CommitLog's end, and only then takes sends.
//
// It is safe beside any other call. Reads, Stats and the consumer and
// transaction calls running meanwhile see the store either as the replica
// (read-only consumer groups, ErrReplica for writes) or as the primary,
// never half promoted. Of concurrent Promotes exactly one promotes; the
// others wait for it and return ErrInvalidArgument, as Promote on a
// primary does. Close waits for a running Promote, then stops what it
// started; a Promote that comes after Close returns ErrClosed. A
// ReplicateFrom started while Promote runs fails with ErrInvalidArgument.
// If Promote fails (a disk error), the store stays a replica that follows
// no primary, with its services as they were: call Promote again, or
// ReplicateFrom.
func (s *Store) Promote() error {
	if s == nil {
		return errs.NilReceiver("mqlite.Store")
	}
	r := &s.repl
	r.promoteMu.Lock()
	defer r.promoteMu.Unlock()
	f, err := r.beginPromote()
	if err != nil {
		return err
	}
	defer r.endPromote()
	if f != nil {
		f.cancel()
		<-f.done
	}
	if err := s.settleReceived(); err != nil {
		return err
	}
	sv, err := s.newServices()
	if err != nil {
		return fmt.Errorf("mqlite: promote: %w", err)
	}
	if err := r.newEpoch(); err != nil {
		sv.discard()
		return err
	}
	s.switchServices(sv)
	s.repl.saveState(0)
	s.opts.Logger.Info("mqlite: promoted to primary", "end", s.log.WrotePosition())
	return nil
}

// beginPromote checks that the store is an open replica and keeps a new
// ReplicateFrom from starting; it returns the running one, if any. Run
// under promoteMu: Close sets closed before it takes promoteMu, so a
// store not closed here keeps its services until Promote returns.
func (r *replication) beginPromote() (*follower, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.s.closed.Load() || r.mu.closed:
		return nil, errs.ErrClosed
	case !r.replica.Load():
		return nil, fmt.Errorf("mqlite: promote: %s is a primary already: %w", r.s.dir, errs.ErrInvalidArgument)
	}
	r.mu.promoting = true
	return r.mu.follow, nil
}

func (r *replication) endPromote() {
	r.mu.Lock()
	r.mu.promoting = false
	r.mu.Unlock()
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

// newServices makes writable services from the followed files and starts
// the transaction service; the delay scheduler and the timer service are
// started by switchServices. Nothing is published yet: on an error what
// was made is closed and the replica's services stay.
func (s *Store) newServices() (*services, error) {
	sched, timers, err := s.newDelays()
	if err != nil {
		return nil, err
	}
	sv := &services{sched: sched, timers: timers}
	if sv.txn, err = s.newTxnService(false); err != nil {
		sv.discard()
		return nil, err
	}
	if sv.consumers, err = s.newConsumers(false); err != nil {
		sv.discard()
		return nil, err
	}
	if err = sv.consumers.ClampOffsets(); err == nil {
		err = sv.txn.Start()
	}
	if err != nil {
		sv.discard()
		return nil, err
	}
	return sv, nil
}

// discard closes services newServices made and never published (their
// timer service was not started: it has nothing to stop).
func (sv *services) discard() {
	if sv.consumers != nil {
		sv.consumers.Close()
	}
	if sv.txn != nil {
		sv.txn.Close()
	}
	sv.sched.Stop()
}

// switchServices publishes the primary's services, starts the delay
// scheduler and the timer service, and then makes the store a primary:
// a call that finds it writable finds the new services. The replica's
// read-only ones are retired, closed by Close (a call that loaded them
// before the switch may still use them).
func (s *Store) switchServices(sv *services) {
	r := &s.repl
	old := s.svc.Swap(sv)
	r.mu.Lock()
	r.mu.services = true
	r.mu.Unlock()
	sv.sched.Start()
	sv.timers.Start()
	r.replica.Store(false)
	r.retired = append(r.retired, old)
}
