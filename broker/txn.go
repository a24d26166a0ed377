package broker

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
	"github.com/mqlite/mqlite/message"
)

// Transactions. A half message (sysFlag TRANSACTION_PREPARED) goes
// through a per-group mqlite.TransactionProducer whose local transaction
// is the remote producer's: it answers the send, then waits for the
// producer's END_TRANSACTION (keyed by the transaction ID, the message's
// unique key) for up to TxEndTimeout. Unknown or no answer leaves the
// message to the Store's check-back service, whose checker for the group
// sends CHECK_TRANSACTION_STATE over a connection of that producer group
// and waits for the END_TRANSACTION it answers with. After a restart the
// checker is registered when a producer of the group sends a heartbeat.

// Client transaction states (commitOrRollback).
const (
	txCommit   = 8
	txRollback = 12
)

type txnBridge struct {
	b  *Broker
	wg sync.WaitGroup // sendHalf goroutines
	mu struct {
		sync.Mutex
		producers map[string]*mqlite.TransactionProducer
		waiting   map[string]chan int // transaction ID -> answer
		queues    map[string]int      // transaction ID -> queue the client chose
		closed    bool
	}
}

func newTxnBridge(b *Broker) *txnBridge {
	t := &txnBridge{b: b}
	t.mu.producers = map[string]*mqlite.TransactionProducer{}
	t.mu.waiting = map[string]chan int{}
	t.mu.queues = map[string]int{}
	return t
}

// register makes sure group has a producer, hence a checker.
func (t *txnBridge) register(group string) *mqlite.TransactionProducer {
	if group == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.mu.producers[group]; p != nil || t.mu.closed {
		return p
	}
	p, err := t.b.store.NewTransactionProducer(t.checker(group), mqlite.TransactionOptions{
		Group:    group,
		Selector: t.selectQueue,
	})
	if err != nil {
		t.b.opts.Logger.Warn("mqlite broker: transaction producer", "group", group, "err", err)
		return nil
	}
	t.mu.producers[group] = p
	return p
}

func (t *txnBridge) selectQueue(m *message.Message, queues int) int {
	t.mu.Lock()
	q, ok := t.mu.queues[m.UniqKey]
	t.mu.Unlock()
	if !ok || q < 0 || q >= queues {
		return 0
	}
	return q
}

func (t *txnBridge) await(id string) (chan int, func()) {
	ch := make(chan int, 1)
	t.mu.Lock()
	t.mu.waiting[id] = ch
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		if t.mu.waiting[id] == ch {
			delete(t.mu.waiting, id)
		}
		delete(t.mu.queues, id)
		t.mu.Unlock()
	}
}

func stateOf(v int) mqlite.TxState {
	switch v {
	case txCommit:
		return mqlite.CommitMessage
	case txRollback:
		return mqlite.RollbackMessage
	}
	return mqlite.TxUnknown
}

func (t *txnBridge) sendHalf(c *conn, req *remoting.Command, h sendHeader, m *mqlite.Message) *remoting.Command {
	group := h.group
	if g := m.Properties[propPGroup]; g != "" {
		group = g
	}
	delete(m.Properties, propTranMsg)
	delete(m.Properties, propPGroup)
	if len(m.Properties) == 0 {
		m.Properties = nil
	}
	if m.UniqKey == "" {
		return missingField(req, "properties.UNIQ_KEY")
	}
	p := t.register(group)
	if p == nil {
		return remoting.NewResponse(req, resServiceNotAvailable, "no transaction producer for group "+group)
	}
	id := m.UniqKey
	answer, done := t.await(id)
	t.mu.Lock()
	t.mu.queues[id] = h.queue
	t.mu.Unlock()
	respCh := make(chan *remoting.Command, 1)
	local := func(ctx context.Context, msg *message.Message) mqlite.TxState {
		resp := remoting.NewResponse(req, resSuccess, "")
		resp.ExtFields["msgId"] = t.b.offsetMsgID(0)
		resp.ExtFields["queueId"] = strconv.Itoa(h.queue)
		resp.ExtFields["queueOffset"] = "0"
		resp.ExtFields["transactionId"] = id
		respCh <- resp
		timer := time.NewTimer(t.b.opts.TxEndTimeout)
		defer timer.Stop()
		select {
		case v := <-answer:
			return stateOf(v)
		case <-timer.C:
		case <-ctx.Done():
		case <-t.b.ctx.Done():
		}
		return mqlite.TxUnknown
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer done()
		_, err := p.SendInTransaction(t.b.ctx, m, local)
		if err != nil {
			select {
			case respCh <- errorResponse(req, err):
			default: // the send was answered; the outcome is the check-back's
			}
		}
	}()
	return <-respCh
}

func (b *Broker) handleEndTransaction(c *conn, req *remoting.Command) *remoting.Command {
	v, err := strconv.Atoi(req.Field("commitOrRollback"))
	if err != nil {
		return missingField(req, "commitOrRollback")
	}
	t := b.txns
	t.mu.Lock()
	ch := t.mu.waiting[req.Field("transactionId")]
	if ch == nil {
		ch = t.mu.waiting[req.Field("msgId")]
	}
	t.mu.Unlock()
	if ch != nil {
		select {
		case ch <- v:
		default:
		}
	}
	return nil // END_TRANSACTION is oneway
}

// checker asks a live producer of group about a half message.
func (t *txnBridge) checker(group string) mqlite.TransactionChecker {
	return func(ctx context.Context, m *mqlite.MessageExt) mqlite.TxState {
		c := t.b.clients.producerConn(group)
		if c == nil || m.UniqKey == "" {
			return mqlite.TxUnknown
		}
		answer, done := t.await(m.UniqKey)
		defer done()
		props := clientProperties(m)
		maps.Copy(props, map[string]string{propPGroup: group, propTranMsg: "true"})
		fields := map[string]string{
			"tranStateTableOffset": strconv.FormatInt(m.QueueOffset, 10),
			"commitLogOffset":      strconv.FormatInt(m.CommitLogOffset, 10),
			"msgId":                m.UniqKey,
			"transactionId":        m.UniqKey,
			"offsetMsgId":          t.b.offsetMsgID(m.CommitLogOffset),
		}
		if !c.notify(reqCheckTransactionState, fields, t.b.appendMessage(nil, m, props)) {
			return mqlite.TxUnknown
		}
		timer := time.NewTimer(t.b.opts.TxCheckTimeout)
		defer timer.Stop()
		select {
		case v := <-answer:
			return stateOf(v)
		case <-timer.C:
		case <-ctx.Done():
		case <-t.b.ctx.Done():
		}
		return mqlite.TxUnknown
	}
}

func (t *txnBridge) close() {
	t.wg.Wait()
	t.mu.Lock()
	t.mu.closed = true
	ps := t.mu.producers
	t.mu.producers = map[string]*mqlite.TransactionProducer{}
	t.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}
