package txn_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// A local transaction whose outcome is unknown is settled by the
// check-back. Users get the service and producers from the root package
// (Store.NewTransactionProducer); here an in-memory Host stands in.
func Example() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	st := newFakeStore(clk)
	svc, err := txn.NewService(st, txn.ServiceOptions{FS: vfs.NewMem(), Dir: "config", Clock: clk})
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	paid := map[string]bool{} // the application's database
	checker := func(_ context.Context, m *message.MessageExt) txn.TxState {
		if paid[m.UniqKey] {
			return txn.CommitMessage
		}
		return txn.RollbackMessage
	}
	p, err := txn.NewProducer(svc, checker, txn.ProducerOptions{Group: "payments"})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	ctx := context.Background()
	res, err := p.SendInTransaction(ctx, &message.Message{Topic: "orders", Body: []byte("order 42 paid")},
		func(_ context.Context, m *message.Message) txn.TxState {
			paid[m.UniqKey] = true // the database commit went through...
			return txn.Unknown     // ...but its acknowledgement was lost
		})
	fmt.Println(err, res.TransactionID != "", len(st.messages("orders")))

	clk.Advance(txn.DefaultTimeout)
	if err := svc.CheckNow(ctx); err != nil {
		panic(err)
	}
	fmt.Println(len(st.messages("orders")), svc.Pending())
	// Output:
	// <nil> true 0
	// 1 0
}
