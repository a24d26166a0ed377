package txn_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/producer"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
)

func TestCommitDeliversOnceWithOriginalContent(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.RollbackMessage))
	in := msg("hello")
	in.Properties[txn.PropCheckImmunity] = "30"
	in.ShardingKey = "order-7"
	var seen *message.Message
	res, err := p.SendInTransaction(context.Background(), in, func(_ context.Context, m *message.Message) txn.TxState {
		seen = m
		if got := e.st.messages("orders"); len(got) != 0 {
			t.Errorf("the real topic holds %d messages before the commit", len(got))
		}
		return txn.CommitMessage
	})
	if err != nil || res.Status != producer.SendOK {
		t.Fatalf("SendInTransaction: %v, %v", res.Status, err)
	}
	if res.TransactionID == "" || seen.UniqKey != res.TransactionID || in.UniqKey != "" {
		t.Fatalf("transaction ID %q, local tx saw %q, caller's message %q", res.TransactionID, seen.UniqKey, in.UniqKey)
	}

	halves := e.st.messages(topic.Half)
	if len(halves) != 1 {
		t.Fatalf("%d half messages, want 1", len(halves))
	}
	h := halves[0]
	wantQ := producer.ShardingQueue("order-7", 4)
	for k, v := range map[string]string{message.PropRealTopic: "orders", message.PropRealQueueID: strconv.Itoa(wantQ), txn.PropProducerGroup: "g", txn.PropTranMsg: "true"} {
		if h.Properties[k] != v {
			t.Errorf("half property %s = %q, want %q", k, h.Properties[k], v)
		}
	}
	if h.UniqKey != res.TransactionID || h.SysFlag&message.SysTxTypeMask != 0 {
		t.Errorf("half uniq %q sysflag %#x", h.UniqKey, h.SysFlag)
	}

	got := e.st.messages("orders")
	if len(got) != 1 {
		t.Fatalf("%d real messages, want 1", len(got))
	}
	r := got[0]
	if r.Topic != "orders" || r.Tags != in.Tags || !slices.Equal(r.Keys, in.Keys) || string(r.Body) != "hello" ||
		!maps.Equal(r.Properties, in.Properties) || r.ShardingKey != in.ShardingKey {
		t.Errorf("real message %+v, sent %+v", r.Message, *in)
	}
	if int(r.QueueID) != wantQ || r.UniqKey != res.TransactionID || r.SysFlag&message.SysTxTypeMask != message.SysTxCommit || r.PreparedTxOffset != h.CommitLogOffset {
		t.Errorf("real message queue %d uniq %q sysflag %#x prepared %d (half at %d)", r.QueueID, r.UniqKey, r.SysFlag, r.PreparedTxOffset, h.CommitLogOffset)
	}
	if res.MsgID() != r.MsgID || res.QueueID != wantQ || res.Topic != "orders" {
		t.Errorf("result %s queue %d topic %q, real message %s", res.MsgID(), res.QueueID, res.Topic, r.MsgID)
	}
	if ops := e.ops(); !slices.Equal(ops, []string{"d:0"}) {
		t.Errorf("op log %v, want [d:0]", ops)
	}

	// Rounds long after: nothing is checked, nothing delivered again.
	for range 3 {
		e.checkNow(time.Hour)
	}
	if n := len(e.st.messages("orders")); n != 1 || e.svc.Pending() != 0 {
		t.Errorf("after rounds: %d real messages, %d pending", n, e.svc.Pending())
	}
}

func TestRollbackNeverDelivers(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	calls := 0
	p := e.producer("g", func(context.Context, *message.MessageExt) txn.TxState { calls++; return txn.CommitMessage })
	res, err := p.SendInTransaction(context.Background(), msg("x"), state(txn.RollbackMessage))
	if err != nil || res.TransactionID == "" {
		t.Fatalf("SendInTransaction: %v %+v", err, res)
	}
	for range 20 {
		e.checkNow(time.Minute)
	}
	if n := len(e.st.messages("orders")); n != 0 || calls != 0 || e.svc.Pending() != 0 {
		t.Errorf("%d real messages, %d checks, %d pending", n, calls, e.svc.Pending())
	}
	if ops := e.ops(); !slices.Equal(ops, []string{"d:0"}) {
		t.Errorf("op log %v", ops)
	}
}

func TestLocalTxFailureIsUnknownAndReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   txn.LocalTx
		log  string
	}{
		{"panic", func(context.Context, *message.Message) txn.TxState { panic("db down") }, "panicked"},
		{"zero", state(0), "undefined state"},
		{"out of range", state(42), "undefined state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, txn.ServiceOptions{})
			p := e.producer("g", checkerOf(txn.CommitMessage))
			res, err := p.SendInTransaction(context.Background(), msg("x"), tc.fn)
			if !errors.Is(err, txn.ErrLocalTx) || !strings.Contains(err.Error(), res.TransactionID) || res.TransactionID == "" {
				t.Fatalf("err %v, transaction %q", err, res.TransactionID)
			}
			if !strings.Contains(e.logs.String(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, e.logs)
			}
			if n := len(e.st.messages(topic.Half)); n != 1 || len(e.st.messages("orders")) != 0 || len(e.ops()) != 0 {
				t.Fatalf("%d half messages, ops %v", n, e.ops())
			}
			e.checkNow(time.Second) // younger than the timeout: not checked
			if e.svc.Pending() != 1 || len(e.st.messages("orders")) != 0 {
				t.Fatalf("pending %d", e.svc.Pending())
			}
			e.checkNow(txn.DefaultTimeout)
			if got := e.uniqs("orders"); got[res.TransactionID] != 1 || len(got) != 1 || e.svc.Pending() != 0 {
				t.Errorf("after check-back: %v, pending %d", got, e.svc.Pending())
			}
		})
	}
}

func TestBadInputStoresNothing(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.CommitMessage))
	called := false
	ok := func(context.Context, *message.Message) txn.TxState { called = true; return txn.CommitMessage }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	delayed := msg("d")
	delayed.DelayLevel = 3
	at := msg("d")
	at.DeliverAt = t0.Add(time.Minute)
	badImm := msg("i")
	badImm.Properties[txn.PropCheckImmunity] = "soon"
	reserved := msg("r")
	reserved.Properties[message.PropRealTopic] = "x"
	internal := msg("i")
	internal.Properties[txn.PropProducerGroup] = "other"
	for _, tc := range []struct {
		name string
		ctx  context.Context
		m    *message.Message
		fn   txn.LocalTx
		want error
	}{
		{"nil message", context.Background(), nil, ok, txn.ErrInvalidArgument},
		{"empty body", context.Background(), &message.Message{Topic: "orders"}, ok, message.ErrEmptyBody},
		{"bad topic", context.Background(), &message.Message{Topic: "a/b", Body: []byte("x")}, ok, message.ErrInvalidTopic},
		{"half topic", context.Background(), &message.Message{Topic: topic.Half, Body: []byte("x")}, ok, message.ErrInvalidTopic},
		{"retry topic", context.Background(), &message.Message{Topic: topic.RetryTopic("g"), Body: []byte("x")}, ok, message.ErrInvalidTopic},
		{"reserved property", context.Background(), reserved, ok, message.ErrInvalidProperty},
		{"internal property", context.Background(), internal, ok, message.ErrInvalidProperty},
		{"delay level", context.Background(), delayed, ok, message.ErrInvalidDelay},
		{"deliver at", context.Background(), at, ok, message.ErrInvalidDelay},
		{"bad immunity", context.Background(), badImm, ok, message.ErrInvalidProperty},
		{"nil local tx", context.Background(), msg("x"), nil, txn.ErrInvalidArgument},
		{"ctx done", cancelled, msg("x"), ok, context.Canceled},
	} {
		_, err := p.SendInTransaction(tc.ctx, tc.m, tc.fn)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != context.Canceled && !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%s: %v does not match ErrInvalidArgument", tc.name, err)
		}
	}
	e.st.auto = false
	if _, err := p.SendInTransaction(context.Background(), &message.Message{Topic: "nosuch", Body: []byte("x")}, ok); !errors.Is(err, errs.ErrTopicNotFound) {
		t.Errorf("unknown topic: %v", err)
	}
	e.st.auto = true
	bad, err := txn.NewProducer(e.svc, checkerOf(txn.CommitMessage), txn.ProducerOptions{Group: "g2", Selector: func(*message.Message, int) int { return 9 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.SendInTransaction(context.Background(), msg("x"), ok); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("bad selector: %v", err)
	}
	bad.Close()

	p.Close()
	p.Close()
	if _, err := p.SendInTransaction(context.Background(), msg("x"), ok); !errors.Is(err, txn.ErrClosed) {
		t.Errorf("closed producer: %v", err)
	}
	q := e.producer("g3", checkerOf(txn.CommitMessage))
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.SendInTransaction(context.Background(), msg("x"), ok); !errors.Is(err, txn.ErrClosed) {
		t.Errorf("closed service: %v", err)
	}
	if called || e.st.appendCount() != 0 {
		t.Errorf("local tx called %v, %d appends", called, e.st.appendCount())
	}
}

func TestBadProducerAndRegistration(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	if _, err := txn.NewProducer(e.svc, nil, txn.ProducerOptions{}); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("nil checker: %v", err)
	}
	if _, err := txn.NewProducer(nil, checkerOf(txn.CommitMessage), txn.ProducerOptions{}); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("nil service: %v", err)
	}
	if _, err := txn.NewProducer(e.svc, checkerOf(txn.CommitMessage), txn.ProducerOptions{Group: "a b"}); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("bad group: %v", err)
	}
	if _, err := e.svc.Register("", checkerOf(txn.CommitMessage)); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("empty group: %v", err)
	}
	e.svc.Close()
	if _, err := e.svc.Register("g", checkerOf(txn.CommitMessage)); !errors.Is(err, txn.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if err := e.svc.CheckNow(context.Background()); !errors.Is(err, txn.ErrClosed) {
		t.Errorf("CheckNow after Close: %v", err)
	}
	if err := e.svc.Start(); !errors.Is(err, txn.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

func TestHalfFlushTimeoutRollsBack(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.CommitMessage))
	e.st.flushTO = func(m *message.Message) bool { return m.Topic == topic.Half }
	called := false
	res, err := p.SendInTransaction(context.Background(), msg("x"), func(context.Context, *message.Message) txn.TxState { called = true; return txn.CommitMessage })
	if !errors.Is(err, txn.ErrFlushTimeout) || res.Status != producer.FlushDiskTimeout || called || res.TransactionID == "" {
		t.Fatalf("err %v status %v local tx called %v", err, res.Status, called)
	}
	e.st.flushTO = nil
	e.checkNow(time.Hour)
	if ops := e.ops(); !slices.Equal(ops, []string{"d:0"}) || len(e.st.messages("orders")) != 0 || e.svc.Pending() != 0 {
		t.Errorf("ops %v pending %d", ops, e.svc.Pending())
	}
}

func TestCommitFlushTimeoutIsDeliveredAndReported(t *testing.T) {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.RollbackMessage))
	e.st.flushTO = func(m *message.Message) bool { return m.Topic == "orders" }
	res, err := p.SendInTransaction(context.Background(), msg("z"), state(txn.CommitMessage))
	if !errors.Is(err, txn.ErrFlushTimeout) || res.Status != producer.FlushDiskTimeout {
		t.Fatalf("err %v status %v", err, res.Status)
	}
	e.checkNow(time.Hour)
	if n := len(e.st.messages("orders")); n != 1 || e.svc.Pending() != 0 {
		t.Errorf("%d delivered, %d pending", n, e.svc.Pending())
	}
}

func TestTxStateString(t *testing.T) {
	for s, want := range map[txn.TxState]string{txn.CommitMessage: "COMMIT_MESSAGE", txn.RollbackMessage: "ROLLBACK_MESSAGE", txn.Unknown: "UNKNOW", 0: "TxState(0)", 9: "TxState(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int(s), s.String(), want)
		}
	}
}

func TestCheckImmunityAllowedByValidate(t *testing.T) {
	m := msg("x")
	m.Properties[txn.PropCheckImmunity] = "60"
	if err := message.Validate(m, 0, message.MaxTopicLen, message.UniqLen, t0); err != nil {
		t.Fatalf("message.Validate refuses %s: %v", txn.PropCheckImmunity, err)
	}
}
