package broker

import (
	"strconv"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// handleSendBack serves CONSUMER_SEND_MSG_BACK: the message at the
// CommitLog offset goes to the Store's retry path (%RETRY%group after a
// delay, %DLQ%group past the reconsume limit). Delay level 0 means the
// group's ladder (as RocketMQ: level 3 + reconsume times), a positive
// level its delay, a negative one the DLQ at once.
func (b *Broker) handleSendBack(c *conn, req *remoting.Command) *remoting.Command {
	group := req.Field("group")
	if group == "" {
		return missingField(req, "group")
	}
	off, err := strconv.ParseInt(req.Field("offset"), 10, 64)
	if err != nil {
		return missingField(req, "offset")
	}
	level, _ := strconv.Atoi(req.Field("delayLevel"))
	m, err := b.store.ReadAt(off)
	if err != nil {
		return errorResponse(req, err)
	}
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	maxTimes := mqlite.DefaultMaxReconsumeTimes
	if v, err := strconv.Atoi(req.Field("maxReconsumeTimes")); err == nil && v >= 0 {
		maxTimes = v
	}
	m.Properties[mqlite.PropMaxReconsumeTimes] = strconv.Itoa(maxTimes)
	switch {
	case level < 0:
		mqlite.RetryAfter(m, 0)
	case level > 0:
		if level > len(b.opts.DelayLevels) {
			level = len(b.opts.DelayLevels)
		}
		mqlite.RetryAfter(m, b.opts.DelayLevels[level-1])
	}
	if err := b.store.SendBack(b.ctx, group, m); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, resSuccess, "")
}
