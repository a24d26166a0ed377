package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// The name server role: route data for topics, broker and cluster info.
// There is one broker, this one, at broker ID 0 (the master).

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSynFlag   int    `json:"topicSynFlag"`
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

type topicRoute struct {
	OrderTopicConf string       `json:"orderTopicConf,omitempty"`
	QueueDatas     []queueData  `json:"queueDatas"`
	BrokerDatas    []brokerData `json:"brokerDatas"`
}

func (b *Broker) brokerData() brokerData {
	return brokerData{Cluster: b.opts.ClusterName, BrokerName: b.opts.BrokerName,
		BrokerAddrs: map[string]string{masterBrokerID: b.addr}}
}

// queuesOf returns the queue count of topic, creating the topic when
// auto-creation allows: TBW102 stands for "any topic the broker will
// create on first send", retry topics are created with one queue.
func (b *Broker) queuesOf(topic string) (int, error) {
	if topic == defaultTopicKey {
		return b.opts.DefaultTopicQueues, nil
	}
	if group, ok := strings.CutPrefix(topic, "%RETRY%"); ok {
		if err := b.store.EnsureRetryTopic(group); err != nil {
			return 0, err
		}
		return 1, nil
	}
	cfg, err := b.store.Topic(topic)
	if err == nil {
		return cfg.Queues, nil
	}
	if !errors.Is(err, mqlite.ErrTopicNotFound) || b.opts.NoAutoCreateTopics {
		return 0, err
	}
	err = b.store.CreateTopic(topic, mqlite.TopicConfig{Queues: b.opts.DefaultTopicQueues})
	if err != nil && !errors.Is(err, mqlite.ErrTopicExists) {
		return 0, err
	}
	cfg, err = b.store.Topic(topic)
	return cfg.Queues, err
}

func (b *Broker) handleRoute(c *conn, req *remoting.Command) *remoting.Command {
	topic := req.Field("topic")
	if topic == "" {
		return missingField(req, "topic")
	}
	n, err := b.queuesOf(topic)
	if err != nil {
		resp := remoting.NewResponse(req, resTopicNotExist,
			fmt.Sprintf("No topic route info in name server for the topic: %s (%v)", topic, err))
		return resp
	}
	route := topicRoute{
		QueueDatas:  []queueData{{BrokerName: b.opts.BrokerName, ReadQueueNums: n, WriteQueueNums: n, Perm: permReadWrite}},
		BrokerDatas: []brokerData{b.brokerData()},
	}
	return jsonResponse(req, route)
}

func (b *Broker) handleClusterInfo(c *conn, req *remoting.Command) *remoting.Command {
	info := map[string]any{
		"brokerAddrTable":  map[string]brokerData{b.opts.BrokerName: b.brokerData()},
		"clusterAddrTable": map[string][]string{b.opts.ClusterName: {b.opts.BrokerName}},
	}
	return jsonResponse(req, info)
}

func (b *Broker) handleTopicList(c *conn, req *remoting.Command) *remoting.Command {
	names := []string{}
	for _, t := range b.store.Topics() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return jsonResponse(req, map[string]any{"topicList": names})
}

func (b *Broker) handleCreateTopic(c *conn, req *remoting.Command) *remoting.Command {
	topic := req.Field("topic")
	if topic == "" {
		return missingField(req, "topic")
	}
	n, err := strconv.Atoi(req.Field("writeQueueNums"))
	if err != nil || n <= 0 {
		n = b.opts.DefaultTopicQueues
	}
	err = b.store.CreateTopic(topic, mqlite.TopicConfig{Queues: n})
	if err != nil && !errors.Is(err, mqlite.ErrTopicExists) {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, resSuccess, "")
}

func jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return remoting.NewResponse(req, resSystemError, err.Error())
	}
	resp := remoting.NewResponse(req, resSuccess, "")
	resp.Body = body
	return resp
}

func missingField(req *remoting.Command, name string) *remoting.Command {
	return remoting.NewResponse(req, resSystemError, fmt.Sprintf("the custom field <%s> is null", name))
}

// errorResponse maps a Store error to RocketMQ's response code.
func errorResponse(req *remoting.Command, err error) *remoting.Command {
	code := resSystemError
	switch {
	case errors.Is(err, mqlite.ErrTopicNotFound):
		code = resTopicNotExist
	case errors.Is(err, mqlite.ErrFlushTimeout):
		code = resFlushDiskTimeout
	case errors.Is(err, mqlite.ErrFlowControl), errors.Is(err, mqlite.ErrDiskFull):
		code = resSystemBusy
	case errors.Is(err, mqlite.ErrClosed), errors.Is(err, mqlite.ErrReadOnly):
		code = resServiceNotAvailable
	case errors.Is(err, mqlite.ErrInvalidArgument), errors.Is(err, mqlite.ErrInvalidTopic),
		errors.Is(err, mqlite.ErrInvalidTags), errors.Is(err, mqlite.ErrInvalidKey),
		errors.Is(err, mqlite.ErrInvalidProperty), errors.Is(err, mqlite.ErrInvalidDelay),
		errors.Is(err, mqlite.ErrMessageTooLarge), errors.Is(err, errBadMessage):
		code = resMessageIllegal
	}
	return remoting.NewResponse(req, code, err.Error())
}
