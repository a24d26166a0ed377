package broker

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// handleQueryMessage serves QUERY_MESSAGE: messages of a topic by key in
// a time range, through the Store's key index.
func (b *Broker) handleQueryMessage(c *conn, req *remoting.Command) *remoting.Command {
	topic, key := req.Field("topic"), req.Field("key")
	if topic == "" {
		return missingField(req, "topic")
	}
	if key == "" {
		return missingField(req, "key")
	}
	maxNum, err := strconv.Atoi(req.Field("maxNum"))
	if err != nil || maxNum <= 0 || maxNum > mqlite.MaxKeyResults {
		maxNum = mqlite.MaxKeyResults
	}
	begin, _ := strconv.ParseInt(req.Field("beginTimestamp"), 10, 64)
	end, err := strconv.ParseInt(req.Field("endTimestamp"), 10, 64)
	if err != nil || end <= 0 {
		end = time.Now().Add(time.Hour).UnixMilli()
	}
	msgs, err := b.store.MessagesByKey(topic, key, time.UnixMilli(begin), time.UnixMilli(end), maxNum)
	if err != nil {
		return errorResponse(req, err)
	}
	if len(msgs) == 0 {
		return remoting.NewResponse(req, resQueryNotFound, "no message with key "+key)
	}
	var body []byte
	var last int64
	for _, m := range msgs {
		body = b.appendMessage(body, m, clientProperties(m))
		last = max(last, m.CommitLogOffset)
	}
	resp := remoting.NewResponse(req, resSuccess, "")
	resp.ExtFields["indexLastUpdateTimestamp"] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	resp.ExtFields["indexLastUpdatePhyoffset"] = strconv.FormatInt(last, 10)
	resp.Body = body
	return resp
}

// handleViewMessage serves VIEW_MESSAGE_BY_ID: the message at a CommitLog
// offset (the client decodes it from the message ID).
func (b *Broker) handleViewMessage(c *conn, req *remoting.Command) *remoting.Command {
	off, err := strconv.ParseInt(req.Field("offset"), 10, 64)
	if err != nil {
		return missingField(req, "offset")
	}
	m, err := b.store.ReadAt(off)
	if err != nil {
		return errorResponse(req, err)
	}
	resp := remoting.NewResponse(req, resSuccess, "")
	resp.Body = b.appendMessage(nil, m, clientProperties(m))
	return resp
}

// handleRuntimeInfo serves GET_BROKER_RUNTIME_INFO: the Store's Stats,
// flattened to RocketMQ's {"table": {name: value}}.
func (b *Broker) handleRuntimeInfo(c *conn, req *remoting.Command) *remoting.Command {
	st, err := b.store.Stats()
	if err != nil {
		return errorResponse(req, err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return remoting.NewResponse(req, resSystemError, err.Error())
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return remoting.NewResponse(req, resSystemError, err.Error())
	}
	table := map[string]string{"brokerVersionDesc": "mqlite", "brokerName": b.opts.BrokerName}
	flatten("", tree, table)
	return jsonResponse(req, map[string]any{"table": table})
}

func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, x, out)
		}
	case []any:
		for i, x := range t {
			flatten(prefix+"."+strconv.Itoa(i), x, out)
		}
	default:
		b, _ := json.Marshal(t)
		out[prefix] = string(b)
	}
}
