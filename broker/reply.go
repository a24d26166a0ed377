package broker

import (
	"strconv"
	"time"

	"github.com/mqlite/mqlite/broker/remoting"
)

// Request-reply (the client's Request / RequestAsync, answered with
// consumer.CreateReplyMessage): the request is an ordinary message whose
// REPLY_TO_CLIENT property names the requester's client ID; the broker
// learns that ID's connection from the request's send (or a heartbeat)
// and pushes the reply there (PUSH_REPLY_MESSAGE_TO_CLIENT). Replies are
// delivered, not stored.

const (
	reqSendReplyMessage   = 324
	reqSendReplyMessageV2 = 325
	reqPushReplyToClient  = 326
	propReplyToClient     = "REPLY_TO_CLIENT"
	// propCluster is set on a request message (as RocketMQ's broker does):
	// the replier's client names the reply topic after it.
	propCluster = "CLUSTER"
)

func (b *Broker) handleSendReply(c *conn, req *remoting.Command) *remoting.Command {
	h, missing := parseSendHeader(req)
	if missing != "" {
		return missingField(req, missing)
	}
	props := parseProperties(h.props)
	to := props[propReplyToClient]
	if to == "" {
		return missingField(req, "properties."+propReplyToClient)
	}
	target := b.clients.byClientID(to)
	if target == nil {
		return remoting.NewResponse(req, resSystemError, "push reply message failed: no connection of client "+to)
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	fields := map[string]string{
		"producerGroup":  h.group,
		"topic":          h.topic,
		"queueId":        strconv.Itoa(h.queue),
		"sysFlag":        strconv.Itoa(h.sysFlag),
		"bornTimestamp":  strconv.FormatInt(h.born, 10),
		"flag":           strconv.Itoa(int(h.flag)),
		"properties":     h.props,
		"reconsumeTimes": strconv.Itoa(h.reconsume),
		"bornHost":       c.remote,
		"storeHost":      b.addr,
		"storeTimestamp": now,
	}
	if !target.notify(reqPushReplyToClient, fields, req.Body) {
		return remoting.NewResponse(req, resSystemError, "push reply message failed: client "+to+" disconnected")
	}
	resp := remoting.NewResponse(req, resSuccess, "")
	resp.ExtFields["msgId"] = b.offsetMsgID(0)
	resp.ExtFields["queueId"] = strconv.Itoa(h.queue)
	resp.ExtFields["queueOffset"] = "0"
	return resp
}
