package txn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/txn"
)

// Many concurrent transactions with random outcomes, while check rounds
// run with a tiny timeout and the fake dispatcher lags behind: the
// delivered set equals the committed set exactly, and no transaction
// whose local outcome is known here is ever checked back.
func TestConcurrentTransactions(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	e := newEnv(t, txn.ServiceOptions{Timeout: time.Millisecond, MaxChecks: 100})
	e.st.manual = true
	rng := rand.New(rand.NewPCG(1, 2))
	local := make([]txn.TxState, n)
	final := make([]txn.TxState, n)
	for i := range n {
		local[i] = txn.TxState(1 + rng.IntN(3))
		final[i] = local[i]
		if final[i] == txn.Unknown {
			final[i] = txn.TxState(1 + rng.IntN(2))
		}
	}
	var bad atomic.Int64
	var asked sync.Map // index -> times asked
	checker := func(_ context.Context, m *message.MessageExt) txn.TxState {
		var i int
		fmt.Sscanf(string(m.Body), "tx-%d", &i)
		if local[i] != txn.Unknown {
			bad.Add(1) // decided by its local transaction: never asked
		}
		v, _ := asked.LoadOrStore(i, new(atomic.Int32))
		if v.(*atomic.Int32).Add(1) < 3 {
			return txn.Unknown // make some of them take several rounds
		}
		return final[i]
	}
	p := e.producer("g", checker)

	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				m := &message.Message{Topic: "orders", Body: fmt.Appendf(nil, "tx-%d", i)}
				if i%2 == 0 {
					m.UniqKey = fmt.Sprintf("U%031d", i)
				}
				if _, err := p.SendInTransaction(context.Background(), m, state(local[i])); err != nil {
					t.Errorf("tx %d: %v", i, err)
				}
			}
		})
	}
	stop := make(chan struct{})
	rounds := make(chan int)
	go func() {
		r := 0
		crng := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stop:
				rounds <- r
				return
			default:
			}
			e.st.dispatch(crng.IntN(200))
			e.clk.Advance(time.Millisecond)
			if err := e.svc.CheckNow(context.Background()); err != nil {
				t.Errorf("round: %v", err)
			}
			r++
		}
	}()
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(stop)
	t.Logf("%d rounds during the sends", <-rounds)
	for range 5 {
		e.st.dispatch(-1)
		e.checkNow(time.Second)
	}

	if bad.Load() != 0 {
		t.Errorf("%d check-backs of transactions decided locally", bad.Load())
	}
	if e.svc.Pending() != 0 {
		t.Errorf("%d pending", e.svc.Pending())
	}
	delivered := map[int]int{}
	for _, m := range e.st.messages("orders") {
		var i int
		fmt.Sscanf(string(m.Body), "tx-%d", &i)
		delivered[i]++
	}
	committed := 0
	for i := range n {
		want := 0
		if final[i] == txn.CommitMessage {
			want = 1
			committed++
		}
		if delivered[i] != want {
			t.Errorf("tx %d (local %v, final %v) delivered %d times", i, local[i], final[i], delivered[i])
		}
	}
	if len(delivered) != committed {
		t.Errorf("delivered %d transactions, committed %d", len(delivered), committed)
	}
}
