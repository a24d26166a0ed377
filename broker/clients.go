package broker

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/mqlite/mqlite/broker/remoting"
)

// The client registry: which client (by ID, on which connection) belongs
// to which producer and consumer groups, with its subscriptions. Members
// leave when their connection closes or they unregister; the others are
// told (NOTIFY_CONSUMER_IDS_CHANGED) so that they rebalance at once.

type subscription struct {
	Topic     string `json:"topic"`
	SubString string `json:"subString"`
	ExprType  string `json:"expressionType"`
}

type heartbeat struct {
	ClientID  string `json:"clientID"`
	Producers []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	Consumers []struct {
		GroupName    string         `json:"groupName"`
		MessageModel string         `json:"messageModel"`
		Subs         []subscription `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

type member struct {
	c    *conn
	subs map[string]subscription
}

type registry struct {
	b  *Broker
	mu sync.Mutex
	// consumers: group -> client ID -> member; producers: group -> client
	// ID -> connection.
	consumers map[string]map[string]*member
	producers map[string]map[string]*conn
	byID      map[string]*conn // client ID -> its latest connection
}

func newRegistry(b *Broker) *registry {
	return &registry{b: b, consumers: map[string]map[string]*member{}, producers: map[string]map[string]*conn{},
		byID: map[string]*conn{}}
}

func (b *Broker) handleHeartbeat(c *conn, req *remoting.Command) *remoting.Command {
	var hb heartbeat
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return remoting.NewResponse(req, resSystemError, "heartbeat body: "+err.Error())
	}
	if hb.ClientID == "" {
		return missingField(req, "clientID")
	}
	c.id.Store(&hb.ClientID)
	for _, cd := range hb.Consumers {
		if cd.MessageModel != "BROADCASTING" && cd.GroupName != "" {
			if err := b.store.EnsureRetryTopic(cd.GroupName); err != nil {
				return errorResponse(req, err)
			}
		}
	}
	var changed []string
	r := b.clients
	r.mu.Lock()
	r.byID[hb.ClientID] = c
	for _, pd := range hb.Producers {
		ms := r.producers[pd.GroupName]
		if ms == nil {
			ms = map[string]*conn{}
			r.producers[pd.GroupName] = ms
		}
		ms[hb.ClientID] = c
	}
	for _, cd := range hb.Consumers {
		ms := r.consumers[cd.GroupName]
		if ms == nil {
			ms = map[string]*member{}
			r.consumers[cd.GroupName] = ms
		}
		subs := map[string]subscription{}
		for _, s := range cd.Subs {
			subs[s.Topic] = s
		}
		old, ok := ms[hb.ClientID]
		if !ok || old.c != c {
			changed = append(changed, cd.GroupName)
		}
		ms[hb.ClientID] = &member{c: c, subs: subs}
	}
	r.mu.Unlock()
	for _, g := range changed {
		r.notify(g)
	}
	for _, pd := range hb.Producers {
		b.txns.register(pd.GroupName)
	}
	return remoting.NewResponse(req, resSuccess, "")
}

func (b *Broker) handleUnregister(c *conn, req *remoting.Command) *remoting.Command {
	id := req.Field("clientID")
	r := b.clients
	var changed []string
	r.mu.Lock()
	if g := req.Field("consumerGroup"); g != "" {
		if _, ok := r.consumers[g][id]; ok {
			delete(r.consumers[g], id)
			changed = append(changed, g)
		}
	}
	if g := req.Field("producerGroup"); g != "" {
		delete(r.producers[g], id)
	}
	r.mu.Unlock()
	for _, g := range changed {
		r.notify(g)
	}
	b.locks.dropClient(id)
	return remoting.NewResponse(req, resSuccess, "")
}

// dropConn removes every membership held through c.
func (r *registry) dropConn(c *conn) {
	var changed []string
	r.mu.Lock()
	for g, ms := range r.consumers {
		for id, m := range ms {
			if m.c == c {
				delete(ms, id)
				changed = append(changed, g)
			}
		}
	}
	for _, ms := range r.producers {
		for id, pc := range ms {
			if pc == c {
				delete(ms, id)
			}
		}
	}
	for id, bc := range r.byID {
		if bc == c {
			delete(r.byID, id)
		}
	}
	r.mu.Unlock()
	for _, g := range changed {
		r.notify(g)
	}
}

// notify tells every member of group that its membership changed.
func (r *registry) notify(group string) {
	r.mu.Lock()
	conns := make([]*conn, 0, len(r.consumers[group]))
	for _, m := range r.consumers[group] {
		conns = append(conns, m.c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.notify(reqNotifyConsumerIdsChanged, map[string]string{"consumerGroup": group}, nil)
	}
}

func (r *registry) members(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.consumers[group]))
	for id := range r.consumers[group] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// subscription returns a member's registered expression for topic.
func (r *registry) subscription(group, topic string) (expr, typ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.consumers[group] {
		if s, ok := m.subs[topic]; ok {
			return s.SubString, s.ExprType
		}
	}
	return "", ""
}

// addProducer records that c speaks for producer group (its sends say
// so; heartbeats say it with the client ID).
func (r *registry) addProducer(group string, c *conn) {
	id := c.clientID()
	if id == "" {
		id = "conn:" + c.remote
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.producers[group]
	if ms == nil {
		ms = map[string]*conn{}
		r.producers[group] = ms
	}
	ms[id] = c
}

// bindClient records that client ID id speaks over c (a request message
// names its sender in REPLY_TO_CLIENT before any heartbeat may have).
func (r *registry) bindClient(id string, c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[id] == nil {
		r.byID[id] = c
	}
}

// byClientID returns the connection of a client (nil if none).
func (r *registry) byClientID(id string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// producerConn returns a live connection of producer group (nil if none).
func (r *registry) producerConn(group string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.producers[group] {
		return c
	}
	return nil
}

func (b *Broker) handleConsumerList(c *conn, req *remoting.Command) *remoting.Command {
	group := req.Field("consumerGroup")
	if group == "" {
		return missingField(req, "consumerGroup")
	}
	ids := b.clients.members(group)
	if len(ids) == 0 {
		return remoting.NewResponse(req, resSystemError, "no consumer of group "+group+" online")
	}
	return jsonResponse(req, map[string]any{"consumerIdList": ids})
}
