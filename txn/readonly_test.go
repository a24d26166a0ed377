package txn_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// A read-only service counts the pending half messages from the queues,
// runs no check round, refuses producers, and saves nothing.
func TestReadOnlyService(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.Unknown))
	for _, st := range []txn.TxState{txn.Unknown, txn.CommitMessage, txn.Unknown} {
		if _, err := p.SendInTransaction(context.Background(), msg("m"), state(st)); err != nil {
			t.Fatal(err)
		}
	}
	ro := e.opts
	ro.FS, ro.ReadOnly = vfs.ReadOnly(e.fs), true
	s, err := txn.NewService(e.st, ro)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if n := s.Pending(); n != 2 {
		t.Fatalf("%d pending, want 2", n)
	}
	if err := s.CheckNow(context.Background()); !errors.Is(err, txn.ErrReadOnly) {
		t.Fatalf("CheckNow: %v", err)
	}
	if _, err := txn.NewProducer(s, checkerOf(txn.CommitMessage), txn.ProducerOptions{}); !errors.Is(err, txn.ErrReadOnly) {
		t.Fatalf("NewProducer: %v", err)
	}
	before := e.st.appendCount()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if e.st.appendCount() != before {
		t.Fatal("a read-only service stored messages")
	}
}
