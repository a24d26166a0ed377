package txn_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/txn"
)

// TestSteppedRoundsOnlyFromStep: a stepped service runs no round on its
// own; Step runs one, on the caller's goroutine, once CheckInterval has
// passed on the clock since Start or its last round, and none before.
func TestSteppedRoundsOnlyFromStep(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{Stepped: true, CheckInterval: 20 * time.Second, Timeout: time.Second})
	var calls atomic.Int32
	p := e.producer("g", func(context.Context, *message.MessageExt) txn.TxState {
		calls.Add(1)
		return txn.CommitMessage
	})
	ctx := context.Background()
	if _, err := p.SendInTransaction(ctx, msg("x"), state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(19 * time.Second)
	if err := e.svc.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d check-backs before CheckInterval", n)
	}
	e.clk.Advance(time.Second)
	if err := e.svc.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n, pending := calls.Load(), e.svc.Pending(); n != 1 || pending != 0 {
		t.Fatalf("after Step at CheckInterval: %d check-backs, %d pending; want 1, 0", n, pending)
	}
	if got := len(e.uniqs("orders")); got != 1 {
		t.Fatalf("%d committed messages, want 1", got)
	}
}

// TestStepNeedsStepped: Step on a service without Stepped is
// ErrInvalidArgument.
func TestStepNeedsStepped(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	if err := e.svc.Step(context.Background()); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Fatalf("Step without Stepped: %v", err)
	}
}
