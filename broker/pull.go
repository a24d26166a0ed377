package broker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
	"github.com/mqlite/mqlite/filter"
)

type pullHeader struct {
	group, topic     string
	queue            int
	offset           int64
	max              int
	sysFlag          int
	commitOffset     int64
	suspend          time.Duration
	subExpr, subType string
}

func parsePullHeader(req *remoting.Command) (pullHeader, string) {
	f := req.ExtFields
	var h pullHeader
	var err error
	h.group, h.topic = f["consumerGroup"], f["topic"]
	if h.group == "" {
		return h, "consumerGroup"
	}
	if h.topic == "" {
		return h, "topic"
	}
	if h.queue, err = strconv.Atoi(f["queueId"]); err != nil {
		return h, "queueId"
	}
	if h.offset, err = strconv.ParseInt(f["queueOffset"], 10, 64); err != nil {
		return h, "queueOffset"
	}
	if h.max, err = strconv.Atoi(f["maxMsgNums"]); err != nil || h.max <= 0 {
		return h, "maxMsgNums"
	}
	h.sysFlag, _ = strconv.Atoi(f["sysFlag"])
	h.commitOffset, _ = strconv.ParseInt(f["commitOffset"], 10, 64)
	ms, _ := strconv.ParseInt(f["suspendTimeoutMillis"], 10, 64)
	h.suspend = time.Duration(ms) * time.Millisecond
	h.subExpr, h.subType = f["subscription"], f["expressionType"]
	return h, ""
}

// maxCachedFilters bounds the compiled-filter cache, so clients sending
// ever new expressions cannot grow it without end (past it, filters are
// compiled per pull).
const maxCachedFilters = 4096

// compileFilter returns the filter of a subscription, cached.
func (b *Broker) compileFilter(typ, expr string) (filter.Expression, error) {
	if expr == "" || expr == "*" {
		return nil, nil
	}
	key := typ + "\x00" + expr
	if v, ok := b.filters.Load(key); ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(filter.Expression), nil
	}
	var f filter.Expression
	var err error
	if typ == "SQL92" {
		f, err = filter.SQL(expr)
	} else {
		f, err = filter.Tag(expr)
	}
	if b.filterCount.Load() < maxCachedFilters {
		b.filterCount.Add(1)
		if err != nil {
			b.filters.Store(key, err)
		} else {
			b.filters.Store(key, f)
		}
	}
	return f, err
}

func (b *Broker) handlePull(c *conn, req *remoting.Command) *remoting.Command {
	h, missing := parsePullHeader(req)
	if missing != "" {
		return missingField(req, missing)
	}
	if h.subExpr == "" {
		h.subExpr, h.subType = b.clients.subscription(h.group, h.topic)
	}
	f, err := b.compileFilter(h.subType, h.subExpr)
	if err != nil {
		return remoting.NewResponse(req, resSubscriptionInvalid, err.Error())
	}
	if h.sysFlag&pullFlagCommitOffset != 0 && h.commitOffset >= 0 {
		_ = b.commitOffset(h.group, h.topic, h.queue, h.commitOffset) // best effort, as RocketMQ
	}
	minOff, err := b.store.MinOffset(h.topic, h.queue)
	if err != nil {
		return errorResponse(req, err)
	}
	maxOff, err := b.store.MaxOffset(h.topic, h.queue)
	if err != nil {
		return errorResponse(req, err)
	}
	if h.offset < minOff || h.offset > maxOff {
		next := minOff
		if h.offset > maxOff {
			next = maxOff
		}
		return pullResponse(req, resPullOffsetMoved, next, minOff, maxOff)
	}
	wait := time.Duration(0)
	if h.sysFlag&pullFlagSuspend != 0 {
		wait = min(h.suspend, b.opts.MaxSuspend)
	}
	if wait <= 0 && h.offset == maxOff {
		return pullResponse(req, resPullNotFound, h.offset, minOff, maxOff)
	}
	if wait <= 0 {
		wait = time.Second // messages are there; only visibility may lag
	}
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	return b.pullWait(ctx, req, h, f, minOff)
}

// pullWait reads from h.offset through the Store's filtered read,
// blocking inside it (woken by the store's dispatcher) until a message
// passes the filter or ctx ends.
func (b *Broker) pullWait(ctx context.Context, req *remoting.Command, h pullHeader, f filter.Expression, minOff int64) *remoting.Command {
	next := h.offset
	for {
		msgs, after, err := b.store.ReadQueueFiltered(ctx, h.topic, h.queue, next, h.max, f)
		if err != nil && len(msgs) == 0 {
			maxOff, _ := b.store.MaxOffset(h.topic, h.queue)
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return pullResponse(req, resPullNotFound, max(next, after), minOff, maxOff)
			}
			if errors.Is(err, mqlite.ErrNotFound) || errors.Is(err, mqlite.ErrOffsetOutOfRange) {
				minOff, _ = b.store.MinOffset(h.topic, h.queue)
				return pullResponse(req, resPullOffsetMoved, minOff, minOff, maxOff)
			}
			return errorResponse(req, err)
		}
		next = max(next, after)
		if len(msgs) > 0 {
			var body []byte
			for _, m := range msgs {
				body = b.appendMessage(body, m, clientProperties(m))
			}
			maxOff, _ := b.store.MaxOffset(h.topic, h.queue)
			resp := pullResponse(req, resSuccess, next, minOff, maxOff)
			resp.Body = body
			return resp
		}
		if ctx.Err() != nil {
			maxOff, _ := b.store.MaxOffset(h.topic, h.queue)
			return pullResponse(req, resPullNotFound, next, minOff, maxOff)
		}
	}
}

func pullResponse(req *remoting.Command, code int, next, minOff, maxOff int64) *remoting.Command {
	resp := remoting.NewResponse(req, code, "")
	resp.ExtFields["nextBeginOffset"] = strconv.FormatInt(next, 10)
	resp.ExtFields["minOffset"] = strconv.FormatInt(minOff, 10)
	resp.ExtFields["maxOffset"] = strconv.FormatInt(maxOff, 10)
	resp.ExtFields["suggestWhichBrokerId"] = masterBrokerID
	return resp
}
