package broker

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/mqlite/mqlite/broker/remoting"
)

// Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ):
// a queue of a group is held by one client until it unlocks it, its
// connection closes, or the lock goes unrenewed for lockTTL (RocketMQ's
// rebalance lock lifetime; clients renew every 20 s).
const lockTTL = 60 * time.Second

type mqKey struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup string  `json:"consumerGroup"`
	ClientID      string  `json:"clientId"`
	MQs           []mqKey `json:"mqSet"`
}

type lockEntry struct {
	client string
	until  time.Time
}

type lockTable struct {
	mu sync.Mutex
	m  map[string]map[mqKey]lockEntry // group -> queue -> holder
}

func newLockTable() *lockTable { return &lockTable{m: map[string]map[mqKey]lockEntry{}} }

func (t *lockTable) lock(group, client string, mqs []mqKey, now time.Time) []mqKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.m[group]
	if g == nil {
		g = map[mqKey]lockEntry{}
		t.m[group] = g
	}
	ok := []mqKey{}
	for _, mq := range mqs {
		e, held := g[mq]
		if held && e.client != client && now.Before(e.until) {
			continue
		}
		g[mq] = lockEntry{client: client, until: now.Add(lockTTL)}
		ok = append(ok, mq)
	}
	return ok
}

func (t *lockTable) unlock(group, client string, mqs []mqKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mq := range mqs {
		if e, held := t.m[group][mq]; held && e.client == client {
			delete(t.m[group], mq)
		}
	}
}

func (t *lockTable) dropClient(client string) {
	if client == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.m {
		for mq, e := range g {
			if e.client == client {
				delete(g, mq)
			}
		}
	}
}

func (b *Broker) handleLock(c *conn, req *remoting.Command) *remoting.Command {
	var body lockBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.NewResponse(req, resSystemError, "lock body: "+err.Error())
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return missingField(req, "consumerGroup/clientId")
	}
	ok := b.locks.lock(body.ConsumerGroup, body.ClientID, body.MQs, time.Now())
	return jsonResponse(req, map[string]any{"lockOKMQSet": ok})
}

func (b *Broker) handleUnlock(c *conn, req *remoting.Command) *remoting.Command {
	var body lockBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.NewResponse(req, resSystemError, "unlock body: "+err.Error())
	}
	b.locks.unlock(body.ConsumerGroup, body.ClientID, body.MQs)
	return remoting.NewResponse(req, resSuccess, "")
}
