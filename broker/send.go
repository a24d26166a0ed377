package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// sendHeader is SEND_MESSAGE's header; SEND_MESSAGE_V2 and batches name
// the same fields with single letters.
type sendHeader struct {
	group, topic, props string
	queue, sysFlag      int
	flag                int32
	born                int64
	reconsume           int
	maxReconsume        int
	batch               bool
}

var v2Names = map[string]string{
	"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
	"e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
	"j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}

func parseSendHeader(req *remoting.Command) (sendHeader, string) {
	f := req.ExtFields
	if _, v2 := f["b"]; v2 {
		long := make(map[string]string, len(f))
		for k, v := range f {
			if name, ok := v2Names[k]; ok {
				long[name] = v
			}
		}
		f = long
	}
	var h sendHeader
	h.group, h.topic, h.props = f["producerGroup"], f["topic"], f["properties"]
	if h.topic == "" {
		return h, "topic"
	}
	var err error
	if h.queue, err = strconv.Atoi(f["queueId"]); err != nil {
		return h, "queueId"
	}
	h.sysFlag, _ = strconv.Atoi(f["sysFlag"])
	flag, _ := strconv.ParseInt(f["flag"], 10, 32)
	h.flag = int32(flag)
	h.born, _ = strconv.ParseInt(f["bornTimestamp"], 10, 64)
	h.reconsume, _ = strconv.Atoi(f["reconsumeTimes"])
	if v, err := strconv.Atoi(f["maxReconsumeTimes"]); err == nil {
		h.maxReconsume = v
	} else {
		h.maxReconsume = -1
	}
	h.batch = f["batch"] == "true" || req.Code == reqSendBatchMessage
	return h, ""
}

func (b *Broker) handleSend(c *conn, req *remoting.Command) *remoting.Command {
	h, missing := parseSendHeader(req)
	if missing != "" {
		return missingField(req, missing)
	}
	if h.group != "" {
		b.clients.addProducer(h.group, c)
	}
	if h.batch {
		return b.sendBatch(req, h)
	}
	props := parseProperties(h.props)
	if to := props[propReplyToClient]; to != "" {
		b.clients.bindClient(to, c) // a request: its reply comes back here
		props[propCluster] = b.opts.ClusterName
	}
	m, err := toMessage(h.topic, req.Body, props, h.flag, h.sysFlag, h.born)
	if err != nil {
		return errorResponse(req, err)
	}
	if h.sysFlag&sysTxPrepared != 0 {
		return b.txns.sendHalf(c, req, h, m)
	}
	res, err := b.store.Put(b.ctx, m, h.queue)
	return b.sendResponse(req, []mqlite.PutResult{res}, err)
}

func (b *Broker) sendBatch(req *remoting.Command, h sendHeader) *remoting.Command {
	items, err := decodeBatch(req.Body)
	if err != nil {
		return errorResponse(req, err)
	}
	msgs := make([]*mqlite.Message, len(items))
	for i, it := range items {
		if msgs[i], err = toMessage(h.topic, it.body, it.props, it.flag, 0, h.born); err != nil {
			return errorResponse(req, fmt.Errorf("batch message %d: %w", i, err))
		}
	}
	res, err := b.store.PutBatch(b.ctx, msgs, h.queue)
	return b.sendResponse(req, res, err)
}

// sendResponse describes stored messages; a flush timeout still names
// them (the client reports SendFlushDiskTimeout).
func (b *Broker) sendResponse(req *remoting.Command, res []mqlite.PutResult, err error) *remoting.Command {
	if err != nil && (!errors.Is(err, mqlite.ErrFlushTimeout) || len(res) == 0 || res[0].Size == 0) {
		return errorResponse(req, err)
	}
	code := resSuccess
	if err != nil {
		code = resFlushDiskTimeout
	}
	resp := remoting.NewResponse(req, code, "")
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = b.offsetMsgID(r.Offset)
	}
	resp.ExtFields["msgId"] = strings.Join(ids, ",")
	resp.ExtFields["queueId"] = strconv.Itoa(res[0].QueueID)
	resp.ExtFields["queueOffset"] = strconv.FormatInt(res[0].QueueOffset, 10)
	resp.ExtFields["MSG_REGION"] = "DefaultRegion"
	resp.ExtFields["TRACE_ON"] = "true"
	return resp
}
