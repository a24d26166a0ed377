package mqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
)

// ErrLocalTx: a local transaction panicked or returned no valid state;
// its message is left to check-back.
var ErrLocalTx = txn.ErrLocalTx

// TxState is a local transaction's outcome; see package txn.
type TxState = txn.TxState

// Transaction outcomes, as RocketMQ names them.
const (
	CommitMessage   = txn.CommitMessage
	RollbackMessage = txn.RollbackMessage
	TxUnknown       = txn.Unknown
)

// TransactionChecker answers a check-back for a half message whose
// outcome is unknown; see txn.Checker.
type TransactionChecker = txn.Checker

// LocalTransaction runs the local part of a transaction; see txn.LocalTx.
type LocalTransaction = txn.LocalTx

// TransactionProducer sends transactional messages; see txn.Producer.
type TransactionProducer = txn.Producer

// TransactionOptions configure a TransactionProducer.
type TransactionOptions = txn.ProducerOptions

// NewTransactionProducer returns a producer of transactional messages
// whose group's unresolved half messages checker answers (also those left
// from before a restart). The store closes it on Close.
func (s *Store) NewTransactionProducer(checker TransactionChecker, opts TransactionOptions) (*TransactionProducer, error) {
	if err := s.writable("new transaction producer"); err != nil {
		return nil, err
	}
	p, err := txn.NewProducer(s.txn(), checker, opts)
	return registered(s, p, err)
}

// CheckTransactions runs one check-back round now over everything stored
// before the call (the service also runs one every
// Options.TxCheckInterval).
func (s *Store) CheckTransactions(ctx context.Context) error {
	if err := s.enter(ctx, "check transactions"); err != nil {
		return err
	}
	if err := s.writable("check transactions"); err != nil {
		return err
	}
	if err := s.WaitVisible(ctx); err != nil {
		return err
	}
	return s.txn().CheckNow(ctx)
}

// PendingTransactions is the number of half messages not yet resolved, as
// of the last check-back round.
func (s *Store) PendingTransactions() int { return s.txn().Pending() }

// newTxnService makes the transaction service; readOnly for a read-only
// store or a replica.
func (s *Store) newTxnService(readOnly bool) (*txn.Service, error) {
	return txn.NewService(txnHost{s}, txn.ServiceOptions{FS: s.fs, Dir: s.path(configDir), Clock: s.opts.Clock,
		Logger: s.opts.Logger, CheckInterval: s.opts.TxCheckInterval, Timeout: s.opts.TxTimeout,
		MaxChecks: s.opts.TxMaxChecks, ParkAfterMax: s.opts.TxParkAfterMax, ReadOnly: s.readOnly || readOnly, Seed: s.txnSeed(),
		Stepped: s.opts.Stepped})
}

// txnHost is the store as the transaction service sees it (txn.Host).
type txnHost struct{ s *Store }

func (t txnHost) Validate(m *message.Message) error { return producerStore(t).Validate(m) }

func (t txnHost) QueueCount(name string, auto int) (int, error) {
	return producerStore(t).QueueCount(name, auto)
}

func (t txnHost) Append(ctx context.Context, m *message.Message, queue int) (message.PutResult, error) {
	if topic.IsSystem(m.Topic) {
		if _, err := t.s.sysQueueCount(m.Topic, 1); err != nil {
			return message.PutResult{}, err
		}
	}
	res, err := t.s.send(ctx, m, queue, true, true)
	if err != nil {
		return res, err
	}
	t.s.txDecided(ctx, m)
	return res, t.s.awaitDurable(ctx, res.End())
}

func (t txnHost) Read(name string, queue int, from int64, max int) ([]*message.MessageExt, error) {
	q, err := t.s.cqueue(name, queue)
	if err != nil {
		return nil, err
	}
	if from < q.MinOffset() {
		return nil, fmt.Errorf("mqlite: offset %d below the queue's minimum %d: %w", from, q.MinOffset(), errs.ErrNotFound)
	}
	n := int(min(int64(max), q.MaxOffset()-from))
	if n <= 0 {
		return nil, nil
	}
	entries := make([]consumequeue.Entry, n)
	n, err = q.Read(from, entries)
	out, _, rerr := t.s.readEntries(name, queue, from, entries[:n], nil, nil)
	if rerr != nil {
		return out, rerr
	}
	return out, err
}

func (t txnHost) MaxOffset(name string, queue int) (int64, error) { return t.s.MaxOffset(name, queue) }

func (t txnHost) ReadAt(off int64) (*message.MessageExt, error) { return t.s.ReadAt(off) }

// HasUniqKey waits until everything stored so far is indexed, then looks
// the key up.
func (t txnHost) HasUniqKey(name, uniq string, since time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.s.WaitVisible(ctx); err != nil && !errors.Is(err, errs.ErrFlushTimeout) {
		return false, err
	}
	return t.s.hasUniqKey(name, uniq, since, nil)
}
