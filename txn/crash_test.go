package txn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
)

// counter is a checker answering want and counting its calls.
type counter struct {
	calls int
	want  txn.TxState
}

func (c *counter) check(context.Context, *message.MessageExt) txn.TxState {
	c.calls++
	return c.want
}

// The process dies while the local transaction runs: after the restart the
// check-back resolves the half message, once.
func TestCrashBetweenHalfAndDecision(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.RollbackMessage))
	for range 2 {
		if _, err := p.SendInTransaction(context.Background(), msg("before"), state(txn.CommitMessage)); err != nil {
			t.Fatal(err)
		}
	}
	e.checkNow(time.Minute) // saves progress past these two
	res, err := p.SendInTransaction(context.Background(), msg("crash"), func(context.Context, *message.Message) txn.TxState {
		e.st.crash()
		return txn.CommitMessage
	})
	if !errors.Is(err, errCrash) {
		t.Fatalf("err %v", err)
	}

	e.crashRestart()
	c := &counter{want: txn.CommitMessage}
	e.producer("g", c.check)
	if err := e.svc.Start(); err != nil {
		t.Fatal(err)
	}
	if e.svc.Pending() != 1 {
		t.Fatalf("pending %d after restart", e.svc.Pending())
	}
	e.checkNow(txn.DefaultTimeout)
	got := e.uniqs("orders")
	if c.calls != 1 || got[res.TransactionID] != 1 || len(got) != 3 || e.svc.Pending() != 0 {
		t.Errorf("%d checks, delivered %v, pending %d", c.calls, got, e.svc.Pending())
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
}

// The real message is stored but the op record is not (a crash between
// them): after the restart the service finds the real message by its
// unique key and only writes the op record.
func TestCrashBetweenRealMessageAndOpRecord(t *testing.T) {
	for _, restart := range []bool{true, false} {
		t.Run(map[bool]string{true: "restart", false: "same process"}[restart], func(t *testing.T) {
			e := newEnv(t, txn.ServiceOptions{})
			p := e.producer("g", checkerOf(txn.RollbackMessage))
			e.st.fail = func(m *message.Message) error {
				if m.Topic == topic.OpHalf {
					return errCrash
				}
				return nil
			}
			res, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.CommitMessage))
			if err != nil || len(e.st.messages("orders")) != 1 {
				t.Fatalf("commit: %v", err)
			}
			e.st.fail = nil
			c := &counter{want: txn.RollbackMessage} // a wrong answer, must not be asked
			if restart {
				p.Close()
				e.crashRestart()
				e.producer("g", c.check)
				if err := e.svc.Start(); err != nil {
					t.Fatal(err)
				}
			}
			e.checkNow(txn.DefaultTimeout)
			e.checkNow(time.Hour)
			if got := e.uniqs("orders"); c.calls != 0 || got[res.TransactionID] != 1 || len(got) != 1 || e.svc.Pending() != 0 {
				t.Errorf("%d checks, delivered %v, pending %d", c.calls, got, e.svc.Pending())
			}
			if n := countOps(e.ops(), "d:0"); n != 1 {
				t.Errorf("%d done records: %v", n, e.ops())
			}
		})
	}
}

// Crash at every point of a run of transactions: after a restart and the
// check-backs, the delivered set is exactly the transactions meant to
// commit whose half message was stored, each once.
func TestCrashAtEveryAppend(t *testing.T) {
	const txs = 12
	rng := rand.New(rand.NewPCG(7, 7))
	final := make([]txn.TxState, txs)
	local := make([]txn.TxState, txs)
	for i := range txs {
		final[i] = []txn.TxState{txn.CommitMessage, txn.RollbackMessage}[rng.IntN(2)]
		local[i] = final[i]
		if rng.IntN(3) == 0 {
			local[i] = txn.Unknown
		}
	}
	truth := func(_ context.Context, m *message.MessageExt) txn.TxState {
		var i int
		fmt.Sscanf(string(m.Body), "tx-%d", &i)
		return final[i]
	}
	for crashAt := 0; ; crashAt++ {
		e := newEnv(t, txn.ServiceOptions{})
		p := e.producer("g", truth)
		e.st.crashAfter = crashAt
		for i := range txs {
			if i == txs/2 {
				e.clk.Advance(time.Minute)
				e.svc.CheckNow(context.Background()) // saves progress midway; may hit the crash
			}
			m := msg(fmt.Sprintf("tx-%d", i))
			m.UniqKey = fmt.Sprintf("U%031d", i)
			if _, err := p.SendInTransaction(context.Background(), m, state(local[i])); err != nil && !errors.Is(err, errCrash) {
				t.Fatal(err)
			}
		}
		halves := len(e.st.messages(topic.Half))
		crashed := e.st.appendCount() == crashAt
		p.Close()
		e.crashRestart()
		e.producer("g", truth)
		if err := e.svc.Start(); err != nil {
			t.Fatal(err)
		}
		e.checkNow(time.Minute)
		e.checkNow(time.Minute)
		got := e.uniqs("orders")
		want := 0
		for i := range halves {
			k := fmt.Sprintf("U%031d", i)
			if final[i] == txn.CommitMessage {
				want++
				if got[k] != 1 {
					t.Errorf("crash at %d: transaction %d delivered %d times", crashAt, i, got[k])
				}
			}
		}
		if len(got) != want || e.svc.Pending() != 0 {
			t.Errorf("crash at %d: delivered %v, want %d; pending %d", crashAt, got, want, e.svc.Pending())
		}
		if !crashed {
			return // ran to the end without crashing
		}
	}
}
