package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/mqlite/mqlite/broker/remoting"
)

// rawClient speaks the protocol directly, for what the official client
// cannot send (bad frames) or does not expose (query by key, view by ID).
type rawClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	op int32
	// notes are the broker's own requests read while waiting for a response.
	notes []*remoting.Command
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawClient) writeRaw(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) read() (*remoting.Command, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := remoting.ReadFrame(c.r, 64<<20)
	if err != nil {
		return nil, err
	}
	return remoting.Decode(frame)
}

func (c *rawClient) call(code int, fields map[string]string, body []byte) *remoting.Command {
	c.t.Helper()
	c.op++
	frame, err := remoting.Encode(&remoting.Command{Code: code, Language: "GO", Version: 317, Opaque: c.op, ExtFields: fields, Body: body})
	if err != nil {
		c.t.Fatal(err)
	}
	c.writeRaw(frame)
	resp, err := c.read()
	for err == nil && !resp.IsResponse() { // a notification from the broker
		c.notes = append(c.notes, resp)
		resp, err = c.read()
	}
	if err != nil {
		c.t.Fatalf("request %d: %v", code, err)
	}
	if resp.Opaque != c.op {
		c.t.Fatalf("response opaque %d flag %d, want %d", resp.Opaque, resp.Flag, c.op)
	}
	return resp
}

// nextNote returns the broker's next request to this client.
func (c *rawClient) nextNote() (*remoting.Command, error) {
	if len(c.notes) > 0 {
		n := c.notes[0]
		c.notes = c.notes[1:]
		return n, nil
	}
	return c.read()
}

// expectClosed asserts the broker closed the connection.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	_, err := c.read()
	if err == nil || !(errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
		c.t.Fatalf("connection still open: %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

func TestBadInputKeepsConnectionWherePossible(t *testing.T) {
	f := startBroker(t, nil, nil)
	c := dialRaw(t, f.b.Addr())
	if r := c.call(9999, nil, nil); r.Code != resNotSupported {
		t.Fatalf("unknown code: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqSendMessage, map[string]string{"queueId": "0"}, []byte("x")); r.Code != resSystemError {
		t.Fatalf("send without topic: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqPullMessage, map[string]string{"consumerGroup": "g", "topic": "T"}, nil); r.Code != resSystemError {
		t.Fatalf("pull without queue: %d %s", r.Code, r.Remark)
	}
	bad := map[string]string{"producerGroup": "p", "topic": "bad topic!", "queueId": "0", "properties": ""}
	if r := c.call(reqSendMessage, bad, []byte("x")); r.Code != resMessageIllegal && r.Code != resTopicNotExist {
		t.Fatalf("send to a bad topic name: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqHeartBeat, nil, []byte("{not json")); r.Code != resSystemError {
		t.Fatalf("bad heartbeat: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqSendBatchMessage, map[string]string{"b": "T", "e": "0"}, []byte{0, 0, 0, 99, 1}); r.Code != resMessageIllegal {
		t.Fatalf("truncated batch: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqGetRouteInfoByTopic, map[string]string{"topic": "ok_topic"}, nil); r.Code != resSuccess {
		t.Fatalf("connection unusable after bad requests: %d %s", r.Code, r.Remark)
	}

	// A malformed header closes that connection only.
	c.writeRaw([]byte{0, 0, 0, 8, 0, 0, 0, 4, '{', 'x', 'x', 'x'})
	c.expectClosed()
	// So does an oversized frame, before the broker reads or allocates it.
	c2 := dialRaw(t, f.b.Addr())
	var big [4]byte
	binary.BigEndian.PutUint32(big[:], 1<<30)
	c2.writeRaw(big[:])
	c2.expectClosed()
	// The RocketMQ binary header type is refused.
	c3 := dialRaw(t, f.b.Addr())
	c3.writeRaw([]byte{0, 0, 0, 4, 1, 0, 0, 0})
	c3.expectClosed()

	c4 := dialRaw(t, f.b.Addr())
	if r := c4.call(reqGetBrokerClusterInfo, nil, nil); r.Code != resSuccess {
		t.Fatalf("broker unusable after bad connections: %d %s", r.Code, r.Remark)
	}
}

func TestQueryByKeyViewByIDAndRuntimeInfo(t *testing.T) {
	f := startBroker(t, nil, nil)
	c := dialRaw(t, f.b.Addr())
	props := "KEYS\x01order-42\x02TAGS\x01A\x02UNIQ_KEY\x01ABCDEF0123456789ABCDEF0123456789\x02"
	send := map[string]string{"producerGroup": "p", "topic": "Orders", "queueId": "1", "properties": props, "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)}
	r := c.call(reqSendMessage, send, []byte("hello"))
	if r.Code != resSuccess || r.Field("queueId") != "1" || r.Field("queueOffset") != "0" {
		t.Fatalf("send: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	id := r.Field("msgId")
	if len(id) != 32 {
		t.Fatalf("message ID %q", id)
	}
	off, err := strconv.ParseUint(id[16:], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	v := c.call(reqViewMessageByID, map[string]string{"offset": strconv.FormatUint(off, 10)}, nil)
	if v.Code != resSuccess || !bytes.Contains(v.Body, []byte("hello")) || !bytes.Contains(v.Body, []byte("order-42")) {
		t.Fatalf("view by id: %d %s", v.Code, v.Remark)
	}
	q := c.call(reqQueryMessage, map[string]string{"topic": "Orders", "key": "order-42", "maxNum": "10", "beginTimestamp": "0",
		"endTimestamp": strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)}, nil)
	if q.Code != resSuccess || !bytes.Equal(q.Body, v.Body) {
		t.Fatalf("query by key: %d %s, body equal to view: %v", q.Code, q.Remark, bytes.Equal(q.Body, v.Body))
	}
	if q := c.call(reqQueryMessage, map[string]string{"topic": "Orders", "key": "nope", "maxNum": "10", "endTimestamp": "0"}, nil); q.Code != resQueryNotFound {
		t.Fatalf("query of a missing key: %d", q.Code)
	}
	ri := c.call(reqGetBrokerRuntimeInfo, nil, nil)
	var info struct {
		Table map[string]string `json:"table"`
	}
	if ri.Code != resSuccess || json.Unmarshal(ri.Body, &info) != nil || len(info.Table) < 5 || info.Table["brokerName"] != DefaultBrokerName {
		t.Fatalf("runtime info: %d %s %v", ri.Code, ri.Remark, info.Table)
	}
}

func TestPendingAndConnectionLimits(t *testing.T) {
	f := startBroker(t, nil, &Options{MaxPendingPerConn: 1, MaxConns: 2})
	c := dialRaw(t, f.b.Addr())
	// A long-polling pull holds the one pending slot; the next request is
	// refused with SYSTEM_BUSY and the connection stays usable.
	pull := map[string]string{"consumerGroup": "g", "topic": "Q", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
		"sysFlag": strconv.Itoa(pullFlagSuspend), "suspendTimeoutMillis": "1500"}
	if r := c.call(reqGetRouteInfoByTopic, map[string]string{"topic": "Q"}, nil); r.Code != resSuccess {
		t.Fatalf("route: %d", r.Code)
	}
	frame, _ := remoting.Encode(&remoting.Command{Code: reqPullMessage, Opaque: 100, ExtFields: pull})
	c.writeRaw(frame)
	busy := c.call(reqGetBrokerClusterInfo, nil, nil)
	if busy.Code != resSystemBusy {
		t.Fatalf("second request while one is pending: %d %s", busy.Code, busy.Remark)
	}
	r, err := c.read()
	if err != nil || r.Opaque != 100 || r.Code != resPullNotFound {
		t.Fatalf("long poll: %v %+v", err, r)
	}
	// A third connection beyond MaxConns is closed at once.
	dialRaw(t, f.b.Addr())
	c3 := dialRaw(t, f.b.Addr())
	c3.expectClosed()
}

func dialRawErr(addr string) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		nc.Close()
	}
	return nc, err
}

func contains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

func TestPendingBytesLimit(t *testing.T) {
	f := startBroker(t, nil, &Options{MaxPendingBytesPerConn: 1024})
	c := dialRaw(t, f.b.Addr())
	send := map[string]string{"producerGroup": "p", "topic": "Big", "queueId": "0"}
	if r := c.call(reqSendMessage, send, make([]byte, 2048)); r.Code != resSystemBusy {
		t.Fatalf("request over the byte budget: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqSendMessage, send, make([]byte, 100)); r.Code != resSuccess {
		t.Fatalf("small request after a refused one: %d %s", r.Code, r.Remark)
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	f := startBroker(t, nil, &Options{IdleTimeout: 200 * time.Millisecond})
	c := dialRaw(t, f.b.Addr())
	c.expectClosed()
}

func TestHeartbeatNotifiesGroupAndOffsets(t *testing.T) {
	f := startBroker(t, nil, nil)
	hb := func(id string) []byte {
		return []byte(`{"clientID":"` + id + `","producerDataSet":[],"consumerDataSet":[{"groupName":"grp","messageModel":"CLUSTERING",` +
			`"subscriptionDataSet":[{"topic":"HT","subString":"*","expressionType":"TAG"}]}]}`)
	}
	a, b := dialRaw(t, f.b.Addr()), dialRaw(t, f.b.Addr())
	if r := a.call(reqHeartBeat, nil, hb("client-a")); r.Code != resSuccess {
		t.Fatalf("heartbeat a: %d %s", r.Code, r.Remark)
	}
	// a is told about its own arrival; drain that.
	if n, err := a.nextNote(); err != nil || n.Code != reqNotifyConsumerIdsChanged {
		t.Fatalf("first notify: %v %+v", err, n)
	}
	if r := b.call(reqHeartBeat, nil, hb("client-b")); r.Code != resSuccess {
		t.Fatalf("heartbeat b: %d", r.Code)
	}
	if len(b.notes) > 1 {
		t.Fatalf("b got %d notifications", len(b.notes))
	}
	n, err := a.nextNote()
	if err != nil || n.Code != reqNotifyConsumerIdsChanged || n.Field("consumerGroup") != "grp" || n.IsResponse() {
		t.Fatalf("a was not notified of b: %v %+v", err, n)
	}
	list := b.call(reqGetConsumerListByGroup, map[string]string{"consumerGroup": "grp"}, nil)
	var ids struct {
		IDs []string `json:"consumerIdList"`
	}
	if json.Unmarshal(list.Body, &ids) != nil || len(ids.IDs) != 2 || ids.IDs[0] != "client-a" || ids.IDs[1] != "client-b" {
		t.Fatalf("consumer list: %s", list.Body)
	}
	a.nc.Close()
	eventually(t, 5*time.Second, "a's membership to end", func() bool { return len(f.b.clients.members("grp")) == 1 })

	// Offsets: max, min, search, commit and query.
	for range 3 {
		send := map[string]string{"producerGroup": "p", "topic": "HT", "queueId": "2"}
		if r := b.call(reqSendMessage, send, []byte("x")); r.Code != resSuccess {
			t.Fatalf("send: %d", r.Code)
		}
	}
	q := map[string]string{"topic": "HT", "queueId": "2"}
	if r := b.call(reqGetMaxOffset, q, nil); r.Field("offset") != "3" {
		t.Fatalf("max offset: %v", r.ExtFields)
	}
	if r := b.call(reqGetMinOffset, q, nil); r.Field("offset") != "0" {
		t.Fatalf("min offset: %v", r.ExtFields)
	}
	search := map[string]string{"topic": "HT", "queueId": "2", "timestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}
	if r := b.call(reqSearchOffsetByTimestamp, search, nil); r.Field("offset") != "3" {
		t.Fatalf("search offset: %v", r.ExtFields)
	}
	upd := map[string]string{"consumerGroup": "grp", "topic": "HT", "queueId": "2", "commitOffset": "2"}
	if r := b.call(reqUpdateConsumerOffset, upd, nil); r.Code != resSuccess {
		t.Fatalf("update offset: %d %s", r.Code, r.Remark)
	}
	qo := map[string]string{"consumerGroup": "grp", "topic": "HT", "queueId": "2"}
	if r := b.call(reqQueryConsumerOffset, qo, nil); r.Field("offset") != "2" {
		t.Fatalf("query offset: %d %v", r.Code, r.ExtFields)
	}
	if off, ok, err := f.store.CommittedOffset("grp", "HT", 2); !ok || err != nil || off != 2 {
		t.Fatalf("store offset: %d %v %v", off, ok, err)
	}
}

func TestRouteWithoutAutoCreate(t *testing.T) {
	f := startBroker(t, nil, &Options{NoAutoCreateTopics: true, DefaultTopicQueues: 3})
	c := dialRaw(t, f.b.Addr())
	if r := c.call(reqGetRouteInfoByTopic, map[string]string{"topic": "Unknown"}, nil); r.Code != resTopicNotExist {
		t.Fatalf("unknown topic: %d %s", r.Code, r.Remark)
	}
	r := c.call(reqGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
	var route topicRoute
	if r.Code != resSuccess || json.Unmarshal(r.Body, &route) != nil || len(route.QueueDatas) != 1 || route.QueueDatas[0].WriteQueueNums != 3 ||
		route.BrokerDatas[0].BrokerAddrs["0"] != f.b.Addr() {
		t.Fatalf("TBW102 route: %d %s", r.Code, r.Body)
	}
	if r := c.call(reqGetRouteInfoByTopic, nil, nil); r.Code != resSystemError {
		t.Fatalf("route without a topic: %d", r.Code)
	}
	if r := c.call(reqGetRouteInfoByTopic, map[string]string{"topic": "bad name!"}, nil); r.Code != resTopicNotExist {
		t.Fatalf("route of a bad name: %d", r.Code)
	}
}
