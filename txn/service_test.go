package txn_test

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// The background rounds check an Unknown transaction every CheckInterval
// once it is older than Timeout; the third answer commits it, and it lands
// at exactly 3 intervals of virtual time.
func TestCheckBackCommitsAtThirdCheck(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	calls := make(chan *message.MessageExt)
	answers := []txn.TxState{txn.Unknown, txn.Unknown, txn.CommitMessage}
	n := 0
	p := e.producer("g", func(_ context.Context, m *message.MessageExt) txn.TxState {
		calls <- m
		n++
		return answers[n-1]
	})
	landed := make(chan *message.MessageExt, 1)
	e.st.onAppend = func(m *message.MessageExt) {
		if m.Topic == "orders" {
			landed <- m
		}
	}
	in := msg("pay")
	res, err := p.SendInTransaction(context.Background(), in, state(txn.Unknown))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	if e.svc.Start() != nil {
		t.Fatal("second Start failed")
	}
	if e.svc.Pending() != 1 {
		t.Fatalf("pending %d after Start", e.svc.Pending())
	}
	e.clk.Advance(txn.DefaultTimeout) // due, but no round yet
	for i := 1; i <= 3; i++ {
		e.clk.Advance(txn.DefaultCheckInterval - map[bool]time.Duration{true: txn.DefaultTimeout}[i == 1])
		m := <-calls
		if m.Topic != "orders" || m.UniqKey != res.TransactionID || m.Properties[txn.PropCheckTimes] != string(rune('0'+i)) ||
			m.Properties[message.PropRealTopic] != "" || string(m.Body) != "pay" || m.Properties["amount"] != "3" {
			t.Fatalf("check %d got %+v", i, m)
		}
		if got := e.clk.Now().Sub(t0); got != time.Duration(i)*txn.DefaultCheckInterval {
			t.Fatalf("check %d at +%s", i, got)
		}
	}
	m := <-landed
	if want := t0.Add(3 * txn.DefaultCheckInterval); !m.StoreTimestamp.Equal(want) {
		t.Errorf("delivered at %s, want %s", m.StoreTimestamp, want)
	}
	if m.UniqKey != res.TransactionID || m.SysFlag&message.SysTxTypeMask != message.SysTxCommit || m.Properties[txn.PropCheckTimes] != "" {
		t.Errorf("delivered %+v", m)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if got := e.uniqs("orders"); len(got) != 1 || got[res.TransactionID] != 1 {
		t.Errorf("delivered %v", got)
	}
	if ops := e.ops(); !slices.Equal(ops, []string{"c:0", "c:0", "c:0", "d:0"}) {
		t.Errorf("op log %v", ops)
	}
}

func TestAlwaysUnknownIsDiscardedAfterMaxChecks(t *testing.T) {
	for _, park := range []bool{false, true} {
		t.Run(map[bool]string{false: "discard", true: "park"}[park], func(t *testing.T) {
			e := newEnv(t, txn.ServiceOptions{MaxChecks: 3, ParkAfterMax: park})
			calls := 0
			p := e.producer("g", func(context.Context, *message.MessageExt) txn.TxState { calls++; return txn.Unknown })
			res, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.Unknown))
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 2; i++ {
				e.checkNow(time.Minute)
				if calls != i || e.svc.Pending() != 1 {
					t.Fatalf("round %d: %d calls, %d pending", i, calls, e.svc.Pending())
				}
			}
			e.checkNow(time.Minute)
			if calls != 3 || e.svc.Pending() != 0 {
				t.Fatalf("after the last check: %d calls, %d pending", calls, e.svc.Pending())
			}
			e.checkNow(time.Minute)
			if calls != 3 || len(e.st.messages("orders")) != 0 {
				t.Errorf("%d calls, %d delivered", calls, len(e.st.messages("orders")))
			}
			parked := e.st.messages(topic.CheckMax)
			if !park {
				if len(parked) != 0 {
					t.Errorf("%d parked", len(parked))
				}
				return
			}
			if len(parked) != 1 || parked[0].UniqKey != res.TransactionID || parked[0].Properties[message.PropRealTopic] != "orders" ||
				parked[0].Properties[txn.PropCheckTimes] != "3" || string(parked[0].Body) != "x" {
				t.Errorf("parked %+v", parked)
			}
			if !strings.Contains(e.logs.String(), "discarded") {
				t.Errorf("discard not logged:\n%s", e.logs)
			}
		})
	}
}

func TestCheckImmunityDelaysFirstCheck(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	calls := 0
	p := e.producer("g", func(context.Context, *message.MessageExt) txn.TxState { calls++; return txn.RollbackMessage })
	m := msg("x")
	m.Properties[txn.PropCheckImmunity] = "100"
	if _, err := p.SendInTransaction(context.Background(), m, state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	e.checkNow(txn.DefaultCheckInterval) // +60 s: immune
	if calls != 0 {
		t.Fatalf("checked at +60s despite 100 s immunity")
	}
	e.checkNow(txn.DefaultCheckInterval) // +120 s
	if calls != 1 || e.svc.Pending() != 0 {
		t.Errorf("%d calls, %d pending at +120s", calls, e.svc.Pending())
	}
}

func TestNoCheckerLeavesPendingUncounted(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{MaxChecks: 2})
	p := e.producer("g", checkerOf(txn.Unknown))
	if _, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	p.Close() // unregisters the only checker of "g"
	for range 5 {
		e.checkNow(time.Hour)
	}
	if e.svc.Pending() != 1 || len(e.ops()) != 0 {
		t.Fatalf("pending %d, ops %v", e.svc.Pending(), e.ops())
	}
	e.producer("g", checkerOf(txn.CommitMessage))
	e.checkNow(time.Minute)
	if e.svc.Pending() != 0 || len(e.st.messages("orders")) != 1 {
		t.Errorf("pending %d, delivered %d", e.svc.Pending(), len(e.st.messages("orders")))
	}
}

func TestCheckerPanicCountsAsUnknown(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{MaxChecks: 2})
	p := e.producer("g", func(context.Context, *message.MessageExt) txn.TxState { panic("boom") })
	if _, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	e.checkNow(time.Minute)
	if e.svc.Pending() != 1 || !strings.Contains(e.logs.String(), "checker panicked") {
		t.Fatalf("pending %d, log:\n%s", e.svc.Pending(), e.logs)
	}
	e.checkNow(time.Minute)
	if e.svc.Pending() != 0 || len(e.st.messages("orders")) != 0 {
		t.Errorf("pending %d after max checks", e.svc.Pending())
	}
}

// Check counts are op records: a restart in the middle keeps them.
func TestCheckCountsSurviveRestart(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{MaxChecks: 3})
	calls := 0
	c := func(context.Context, *message.MessageExt) txn.TxState { calls++; return txn.Unknown }
	p := e.producer("g", c)
	// Resolved transactions before and after the unknown one move the
	// progress, but not past it.
	for _, s := range []txn.TxState{txn.CommitMessage, txn.Unknown, txn.RollbackMessage, txn.CommitMessage} {
		if _, err := p.SendInTransaction(context.Background(), msg("x"), state(s)); err != nil {
			t.Fatal(err)
		}
	}
	e.checkNow(time.Minute)
	e.checkNow(time.Minute)
	if calls != 2 {
		t.Fatalf("%d calls", calls)
	}
	p.Close()
	e.crashRestart()
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	if e.svc.Pending() != 1 {
		t.Fatalf("pending %d after restart", e.svc.Pending())
	}
	e.producer("g", c)
	e.checkNow(time.Minute)
	if calls != 3 || e.svc.Pending() != 0 {
		t.Errorf("%d calls in all, %d pending", calls, e.svc.Pending())
	}
	if got := e.uniqs("orders"); len(got) != 2 {
		t.Errorf("delivered %v", got)
	}
}

func TestDamagedProgressFile(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.CommitMessage))
	if _, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.CommitMessage)); err != nil {
		t.Fatal(err)
	}
	e.checkNow(time.Minute)
	file := path.Join(configDir, txn.ProgressFile)
	b, err := vfs.ReadFile(e.fs, file)
	if err != nil {
		t.Fatalf("progress file: %v", err)
	}
	for name, bad := range map[string][]byte{
		"flipped": append(b[:len(b)-1:len(b)-1], b[len(b)-1]^1),
		"torn":    b[:len(b)/2],
		"empty":   {},
		"magic":   append([]byte("XXXX"), b[4:]...),
	} {
		if err := vfs.WriteFileAtomic(e.fs, configDir, txn.ProgressFile, bad); err != nil {
			t.Fatal(err)
		}
		_, err := txn.NewService(e.st, e.opts)
		var ce *errs.CorruptError
		if !errors.Is(err, txn.ErrCorrupt) || !errors.As(err, &ce) || ce.Path != file || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A progress file ahead of the queues (their tail lost) is moved back.
func TestProgressPastEndIsClamped(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.CommitMessage))
	for range 3 {
		if _, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.RollbackMessage)); err != nil {
			t.Fatal(err)
		}
	}
	e.checkNow(time.Minute)
	p.Close()
	// A new store: the queues are empty, the progress file says 3.
	e.st = newFakeStore(e.clk)
	e.crashRestart()
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.logs.String(), "moved back") {
		t.Errorf("clamp not logged:\n%s", e.logs)
	}
	p = e.producer("g", checkerOf(txn.CommitMessage))
	if _, err := p.SendInTransaction(context.Background(), msg("y"), state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	e.checkNow(time.Minute)
	if got := e.uniqs("orders"); len(got) != 1 || e.svc.Pending() != 0 {
		t.Errorf("delivered %v, pending %d", got, e.svc.Pending())
	}
}

// Half messages deleted by retention before being resolved are skipped.
func TestHalfMessagesDeletedByRetention(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.CommitMessage))
	for range 5 {
		if _, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.Unknown)); err != nil {
			t.Fatal(err)
		}
	}
	e.st.trim(topic.Half, 3)
	e.checkNow(time.Minute)
	if got := e.uniqs("orders"); len(got) != 2 || e.svc.Pending() != 0 {
		t.Errorf("delivered %v, pending %d", got, e.svc.Pending())
	}
}

func TestServiceOptions(t *testing.T) {
	_, err := txn.NewService(newFakeStore(nil), txn.ServiceOptions{CheckInterval: -1, Timeout: -1, MaxChecks: -1})
	if !errors.Is(err, txn.ErrInvalidArgument) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"FS", "Dir", "CheckInterval", "Timeout", "MaxChecks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
	if _, err := txn.NewService(nil, txn.ServiceOptions{FS: vfs.NewMem(), Dir: "d"}); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
}

// Close stops the loop even while a checker blocks: the checker's context
// is cancelled.
func TestCloseCancelsRunningChecker(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	sender := e.producer("g", checkerOf(txn.Unknown))
	if _, err := sender.SendInTransaction(context.Background(), msg("x"), state(txn.Unknown)); err != nil {
		t.Fatal(err)
	}
	sender.Close()
	in := make(chan struct{})
	unregister, err := e.svc.Register("g", func(ctx context.Context, _ *message.MessageExt) txn.TxState {
		close(in)
		<-ctx.Done()
		return txn.CommitMessage // too late: the store is closing
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(txn.DefaultCheckInterval)
	<-in
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	unregister()
}
