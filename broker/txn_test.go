package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/mqlite/mqlite"
)

// txListener decides by body: "commit", "rollback", anything else unknown;
// the check-back answers checkAnswer.
type txListener struct {
	mu          sync.Mutex
	checkAnswer primitive.LocalTransactionState
	checked     []string
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = append(l.checked, string(m.Body))
	return l.checkAnswer
}

func newTxProducer(t *testing.T, f *fixture, group string, l *txListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer(f.ns()), producer.WithGroupName(group),
		producer.WithInstanceName(uniq("tx")), producer.WithRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(p.Shutdown) })
	return p
}

func txStoreOptions() *mqlite.Options {
	return &mqlite.Options{TxCheckInterval: 100 * time.Millisecond, TxTimeout: 100 * time.Millisecond}
}

func TestTransactionCommitRollbackCheckBack(t *testing.T) {
	f := startBroker(t, txStoreOptions(), &Options{TxEndTimeout: 2 * time.Second})
	topic := uniq("T")
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	l := &txListener{checkAnswer: primitive.CommitMessageState}
	p := newTxProducer(t, f, uniq("txg"), l)
	for _, body := range []string{"commit", "rollback", "unknown"} {
		res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("%s: %v %+v", body, err, res)
		}
	}
	eventually(t, 20*time.Second, "commit and the checked-back message", func() bool { return got.count() >= 2 })
	b := got.bodies()
	if b["commit"] != 1 || b["unknown"] != 1 || b["rollback"] != 0 {
		t.Fatalf("delivered %v", b)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.checked) == 0 || l.checked[0] != "unknown" {
		t.Fatalf("checked back %v, want the unknown one", l.checked)
	}
	for _, c := range l.checked {
		if c != "unknown" {
			t.Fatalf("checked back %q", c)
		}
	}
}

func TestTransactionCheckBackAfterRestart(t *testing.T) {
	f := startBroker(t, txStoreOptions(), &Options{TxEndTimeout: 2 * time.Second})
	topic, group := uniq("T"), uniq("txg")
	l := &txListener{checkAnswer: primitive.UnkonwnState}
	p := newTxProducer(t, f, group, l)
	if _, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("pending"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a first check-back", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.checked) > 0
	})
	// The broker and the store restart; the first producer's process lives
	// on (now answering commit) and a second one of the group connects.
	f.restart()
	if n := f.store.PendingTransactions(); n != 1 {
		t.Fatalf("%d pending transactions after restart, want 1", n)
	}
	l.mu.Lock()
	l.checkAnswer = primitive.CommitMessageState
	l.mu.Unlock()
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	l2 := &txListener{checkAnswer: primitive.CommitMessageState}
	p2 := newTxProducer(t, f, group, l2)
	if _, err := p2.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("commit"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the message committed by a check-back after restart", func() bool { return got.count() >= 2 })
	if b := got.bodies(); b["pending"] != 1 {
		t.Fatalf("delivered %v", b)
	}
}
