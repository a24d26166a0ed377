package broker

import (
	"strconv"
	"time"

	"github.com/mqlite/mqlite/broker/remoting"
)

// queueArgs reads topic and queueId.
func queueArgs(req *remoting.Command) (string, int, string) {
	topic := req.Field("topic")
	if topic == "" {
		return "", 0, "topic"
	}
	q, err := strconv.Atoi(req.Field("queueId"))
	if err != nil {
		return "", 0, "queueId"
	}
	return topic, q, ""
}

func offsetResponse(req *remoting.Command, off int64) *remoting.Command {
	resp := remoting.NewResponse(req, resSuccess, "")
	resp.ExtFields["offset"] = strconv.FormatInt(off, 10)
	return resp
}

// commitOffset stores a group's offset, clamped into the queue's range
// (a client may commit past messages retention removed).
func (b *Broker) commitOffset(group, topic string, q int, off int64) error {
	minOff, err := b.store.MinOffset(topic, q)
	if err != nil {
		return err
	}
	maxOff, err := b.store.MaxOffset(topic, q)
	if err != nil {
		return err
	}
	return b.store.CommitOffset(group, topic, q, max(minOff, min(off, maxOff)))
}

func (b *Broker) handleQueryOffset(c *conn, req *remoting.Command) *remoting.Command {
	group := req.Field("consumerGroup")
	if group == "" {
		return missingField(req, "consumerGroup")
	}
	topic, q, missing := queueArgs(req)
	if missing != "" {
		return missingField(req, missing)
	}
	off, ok, err := b.store.CommittedOffset(group, topic, q)
	if err != nil {
		return errorResponse(req, err)
	}
	if ok {
		return offsetResponse(req, off)
	}
	// As RocketMQ: a new group on a queue that still holds its first
	// message starts at 0; otherwise the client decides (QUERY_NOT_FOUND).
	if minOff, err := b.store.MinOffset(topic, q); err == nil && minOff == 0 {
		return offsetResponse(req, 0)
	}
	return remoting.NewResponse(req, resQueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
}

func (b *Broker) handleUpdateOffset(c *conn, req *remoting.Command) *remoting.Command {
	group := req.Field("consumerGroup")
	if group == "" {
		return missingField(req, "consumerGroup")
	}
	topic, q, missing := queueArgs(req)
	if missing != "" {
		return missingField(req, missing)
	}
	off, err := strconv.ParseInt(req.Field("commitOffset"), 10, 64)
	if err != nil {
		return missingField(req, "commitOffset")
	}
	if err := b.commitOffset(group, topic, q, off); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, resSuccess, "")
}

func (b *Broker) handleMaxOffset(c *conn, req *remoting.Command) *remoting.Command {
	return queueOffset(req, b.store.MaxOffset)
}

func (b *Broker) handleMinOffset(c *conn, req *remoting.Command) *remoting.Command {
	return queueOffset(req, b.store.MinOffset)
}

// queueOffset answers a request naming a queue with the offset get gives.
func queueOffset(req *remoting.Command, get func(topic string, queue int) (int64, error)) *remoting.Command {
	topic, q, missing := queueArgs(req)
	if missing != "" {
		return missingField(req, missing)
	}
	off, err := get(topic, q)
	if err != nil {
		return errorResponse(req, err)
	}
	return offsetResponse(req, off)
}

func (b *Broker) handleSearchOffset(c *conn, req *remoting.Command) *remoting.Command {
	topic, q, missing := queueArgs(req)
	if missing != "" {
		return missingField(req, missing)
	}
	ts, err := strconv.ParseInt(req.Field("timestamp"), 10, 64)
	if err != nil {
		return missingField(req, "timestamp")
	}
	off, err := b.store.OffsetForTime(topic, q, time.UnixMilli(ts))
	if err != nil {
		return errorResponse(req, err)
	}
	return offsetResponse(req, off)
}
