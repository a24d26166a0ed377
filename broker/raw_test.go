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
	if err != nil {
		c.t.Fatalf("request %d: %v", code, err)
	}
	if resp.Opaque != c.op || !resp.IsResponse() {
		c.t.Fatalf("response opaque %d flag %d, want %d", resp.Opaque, resp.Flag, c.op)
	}
	return resp
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
