package mqlite

import (
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/txn"
)

// services are the store's delay scheduler, timer service, transaction
// service and consumer groups. Store.svc publishes them: Open sets them
// before the Store is shared, and Promote replaces them all at once with
// writable ones (replica_promote.go), so that a call running beside
// Promote uses either the replica's read-only set or the primary's, never
// a mix of a half-replaced one. A call loads the pointer once per use; no
// Put or consume path reads it.
type services struct {
	sched     *delay.Scheduler
	timers    *delay.Timers
	txn       *txn.Service
	consumers *consumer.Manager
}

func (s *Store) sched() *delay.Scheduler      { return s.svc.Load().sched }
func (s *Store) timers() *delay.Timers        { return s.svc.Load().timers }
func (s *Store) txn() *txn.Service            { return s.svc.Load().txn }
func (s *Store) consumers() *consumer.Manager { return s.svc.Load().consumers }

// stopServices is Close's part that Promote must not overlap: it ends
// replication (ServeReplica, ReplicateFrom), closes the consumer groups,
// the producers and consumers handed out, the transaction service and the
// delay services, and the read-only services a Promote replaced. Holding
// promoteMu, it runs before or after a Promote, never during one: a
// Promote that comes after finds the store closed.
func (s *Store) stopServices() []error {
	r := &s.repl
	r.promoteMu.Lock()
	defer r.promoteMu.Unlock()
	r.close()
	sv := s.svc.Load()
	errList := []error{sv.consumers.Close(), s.closeHandles(), sv.txn.Close()}
	if r.servicesRunning() {
		sv.timers.Stop()
		errList = append(errList, sv.sched.Stop())
	}
	for _, old := range r.retired {
		errList = append(errList, old.consumers.Close(), old.txn.Close())
	}
	r.retired = nil
	return errList
}
