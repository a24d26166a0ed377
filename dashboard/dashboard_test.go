package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const evil = "<script>alert(1)</script>"

// fixture is a store with a topic of 3 queues (7 messages), a group that
// consumed 2 of queue 0's and has one dead letter, and a message whose
// key, tag, property and body are HTML.
type fixture struct {
	s      *mqlite.Store
	dead   string // the dead letter's ID
	evilID string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.CreateTopic("orders", mqlite.TopicConfig{Queues: 3}))
	ctx := context.Background()
	for i := range 6 {
		_, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Keys: []string{"k" + string(rune('0'+i))}, Body: []byte("b")}, i%3)
		require.NoError(t, err)
	}
	r, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Keys: []string{evil}, Tags: "<b>tag</b>",
		Properties: map[string]string{"p": "<img src=x onerror=alert(2)>"}, Body: []byte(evil)}, 0)
	require.NoError(t, err)
	f := &fixture{s: s, evilID: r.MsgID()}

	pc, err := s.NewPullConsumer("billing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	got, err := pc.Poll(ctx, 1)
	require.NoError(t, err)
	dead := got[0].Clone()
	require.NoError(t, pc.Close())
	require.NoError(t, s.SetConsumerOffset("billing", "orders", 0, 2))
	mqlite.RetryAfter(dead, 0) // straight to the DLQ
	require.NoError(t, s.SendBack(ctx, "billing", dead))
	require.NoError(t, s.WaitVisible(ctx))
	ds, err := s.DeadLetters("billing", 0, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	f.dead = ds[0].MsgID
	return f
}

func serve(t *testing.T, s *mqlite.Store, o *Options) *httptest.Server {
	t.Helper()
	h, err := New(s, o)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, body := get(t, u)
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), v))
}

// TestDashboardJSONMatchesStore: every JSON endpoint reports the numbers
// the store reports.
func TestDashboardJSONMatchesStore(t *testing.T) {
	f := newFixture(t)
	srv := serve(t, f.s, nil)
	st, err := f.s.Stats()
	require.NoError(t, err)

	var ov Overview
	getJSON(t, srv.URL+"/api/overview", &ov)
	require.Equal(t, len(st.Topics), ov.Topics)
	require.Equal(t, st.Throughput.Puts, ov.Throughput.Puts)

	var tl TopicList
	getJSON(t, srv.URL+"/api/topics", &tl)
	var orders *TopicRow
	for i := range tl.Topics {
		if tl.Topics[i].Name == "orders" {
			orders = &tl.Topics[i]
		}
	}
	require.NotNil(t, orders)
	require.Equal(t, TopicRow{Name: "orders", Queues: 3, Messages: 7}, *orders)

	var tp TopicPage
	getJSON(t, srv.URL+"/api/topic?name=orders", &tp)
	require.Equal(t, []QueueRow{{ID: 0, MaxOffset: 3, Messages: 3}, {ID: 1, MaxOffset: 2, Messages: 2}, {ID: 2, MaxOffset: 2, Messages: 2}}, tp.Queues)

	lag, err := f.s.ConsumerLag("billing")
	require.NoError(t, err)
	var want int64
	for _, l := range lag {
		want += l.Lag
	}
	var gl GroupList
	getJSON(t, srv.URL+"/api/groups", &gl)
	require.Len(t, gl.Groups, 1)
	require.Equal(t, GroupRow{Name: "billing", Model: "Clustering", Topics: []string{"orders"}, Members: []string{}, Lag: want, Dead: 1}, gl.Groups[0])

	var gp GroupPage
	getJSON(t, srv.URL+"/api/group?name=billing", &gp)
	require.Len(t, gp.Queues, len(lag))
	for i, l := range lag {
		require.Equal(t, LagRow{Topic: l.Topic, Queue: l.ID, Committed: l.Committed, MaxOffset: l.MaxOffset, Lag: l.Lag}, gp.Queues[i])
	}

	var dp DLQPage
	getJSON(t, srv.URL+"/api/dlq?group=billing", &dp)
	require.Len(t, dp.Messages, 1)
	require.Equal(t, f.dead, dp.Messages[0].ID)
	require.Equal(t, "orders", dp.Messages[0].OriginalTopic)
	require.Equal(t, int64(-1), dp.Next)

	var m Msg
	getJSON(t, srv.URL+"/api/message?id="+f.evilID, &m)
	require.Equal(t, evil, m.Body)
	var sp SearchPage
	getJSON(t, srv.URL+"/api/search?topic=orders&key=k4", &sp)
	require.Len(t, sp.Messages, 1)
	require.Equal(t, []string{"k4"}, sp.Messages[0].Keys)
}

// TestDashboardEscapesUserData: HTML in keys, tags, properties, bodies
// and request parameters shows as text on every page and in the JSON.
func TestDashboardEscapesUserData(t *testing.T) {
	f := newFixture(t)
	srv := serve(t, f.s, nil)
	for _, u := range []string{
		"/message?id=" + f.evilID,
		"/search?topic=orders&key=" + url.QueryEscape(evil),
		"/topic?name=" + url.QueryEscape(evil),
		"/group?name=" + url.QueryEscape(evil),
		"/dlq?group=" + url.QueryEscape(evil),
		"/message?id=" + url.QueryEscape(evil),
		"/api/message?id=" + f.evilID,
		"/api/search?topic=orders&key=" + url.QueryEscape(evil),
		"/api/topic?name=" + url.QueryEscape(evil),
	} {
		_, body := get(t, srv.URL+u)
		require.NotContains(t, body, "<script>", u)
		require.NotContains(t, body, "<img", u)
		require.NotContains(t, body, "<b>tag", u)
	}
	_, body := get(t, srv.URL+"/message?id="+f.evilID)
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, body, "&lt;img src=x onerror=alert(2)&gt;")
	_, body = get(t, srv.URL+"/api/message?id="+f.evilID)
	require.Contains(t, body, `\u003cscript\u003e`)
}

// TestDashboardWrites: re-drive is refused while writes are off, without
// the token, across origins and by GET; with all three it re-drives.
func TestDashboardWrites(t *testing.T) {
	f := newFixture(t)
	off := serve(t, f.s, nil)
	form := url.Values{"group": {"billing"}, "id": {f.dead}}
	resp, err := http.PostForm(off.URL+"/redrive", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	_, body := get(t, off.URL+"/dlq?group=billing")
	require.NotContains(t, body, "re-drive</button>")

	h, err := New(f.s, &Options{AllowWrites: true})
	require.NoError(t, err)
	on := httptest.NewServer(h)
	defer on.Close()
	_, body = get(t, on.URL+"/dlq?group=billing")
	require.Contains(t, body, "re-drive</button>")
	require.Contains(t, body, h.Token())

	total := func() int64 {
		var n int64
		for q := range 3 {
			m, err := f.s.MaxOffset("orders", q)
			require.NoError(t, err)
			n += m
		}
		return n
	}
	before := total()
	post := func(v url.Values, hdr map[string]string) int {
		req, err := http.NewRequest("POST", on.URL+"/redrive", strings.NewReader(v.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post(form, nil), "no token")
	withTok := url.Values{"group": {"billing"}, "id": {f.dead}, "token": {h.Token()}}
	require.Equal(t, http.StatusForbidden, post(withTok, map[string]string{"Sec-Fetch-Site": "cross-site"}), "cross origin")
	code, _ := get(t, on.URL+"/redrive?"+withTok.Encode())
	require.Equal(t, http.StatusMethodNotAllowed, code)
	require.NoError(t, f.s.WaitVisible(context.Background()))
	require.Equal(t, before, total(), "nothing re-driven yet")

	require.Equal(t, http.StatusSeeOther, post(withTok, map[string]string{"Sec-Fetch-Site": "same-origin"}))
	require.NoError(t, f.s.WaitVisible(context.Background()))
	require.Equal(t, before+1, total())
	bad := url.Values{"group": {"billing"}, "id": {"nope"}, "token": {h.Token()}}
	require.Equal(t, http.StatusBadRequest, post(bad, nil))
}

// TestDashboardPaginates10000Queues: a topic with 10,000 queues answers
// with one page of PageSize queues, and the pager walks to the last.
func TestDashboardPaginates10000Queues(t *testing.T) {
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("big", mqlite.TopicConfig{Queues: 10000}))
	_, err = s.Put(context.Background(), &mqlite.Message{Topic: "big", Body: []byte("x")}, 9999)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(context.Background()))
	srv := serve(t, s, nil)
	var tp TopicPage
	getJSON(t, srv.URL+"/api/topic?name=big", &tp)
	require.Len(t, tp.Queues, DefaultPageSize)
	require.Equal(t, Pager{Page: 0, Pages: 100, Total: 10000, Size: DefaultPageSize}, tp.Pager)
	require.Equal(t, 0, tp.Queues[0].ID)
	getJSON(t, srv.URL+"/api/topic?name=big&page=99", &tp)
	require.Len(t, tp.Queues, DefaultPageSize)
	require.Equal(t, QueueRow{ID: 9999, MaxOffset: 1, Messages: 1}, tp.Queues[99])
	code, _ := get(t, srv.URL+"/api/topic?name=big&page=100")
	require.Equal(t, http.StatusBadRequest, code)
	code, body := get(t, srv.URL+"/topic?name=big&page=3")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, DefaultPageSize, strings.Count(body, "<tr data-queue="))
	require.Contains(t, body, `page=4">next</a>`)

	small := serve(t, s, &Options{PageSize: 7})
	getJSON(t, small.URL+"/api/topic?name=big&page=2", &tp)
	require.Len(t, tp.Queues, 7)
	require.Equal(t, 14, tp.Queues[0].ID)
}

// TestDashboardBadInput: unknown names are 404, malformed input 400, bad
// options an error; a prefix is honoured.
func TestDashboardBadInput(t *testing.T) {
	f := newFixture(t)
	srv := serve(t, f.s, nil)
	for u, want := range map[string]int{
		"/topic?name=nosuch":            http.StatusNotFound,
		"/api/topic?name=nosuch":        http.StatusNotFound,
		"/group?name=nosuch":            http.StatusNotFound,
		"/message?id=zz":                http.StatusBadRequest,
		"/api/topics?page=-1":           http.StatusBadRequest,
		"/api/dlq?group=billing&from=x": http.StatusBadRequest,
		"/api/search?topic=orders":      http.StatusBadRequest,
		"/nosuch":                       http.StatusNotFound,
	} {
		code, _ := get(t, srv.URL+u)
		require.Equal(t, want, code, u)
	}
	_, err := New(f.s, &Options{PageSize: -1})
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)
	_, err = New(nil, nil)
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)
	_, err = New(f.s, &Options{Prefix: "x"})
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)

	pre := serve(t, f.s, &Options{Prefix: "/mq/"})
	code, body := get(t, pre.URL+"/mq/topics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `href="/mq/topic?name=orders"`)
	code, _ = get(t, pre.URL+"/topics")
	require.Equal(t, http.StatusNotFound, code)
}

// TestDashboardRates: a topic's put rate is the change in its offsets
// between two views a second or more apart, on the dashboard's clock.
func TestDashboardRates(t *testing.T) {
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("r", mqlite.TopicConfig{Queues: 1}))
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	srv := serve(t, s, &Options{Clock: clk})
	var tp TopicPage
	getJSON(t, srv.URL+"/api/topic?name=r", &tp)
	require.Zero(t, tp.Queues[0].Rate)
	for range 10 {
		_, err := s.Put(context.Background(), &mqlite.Message{Topic: "r", Body: []byte("x")}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	clk.Advance(2 * time.Second)
	getJSON(t, srv.URL+"/api/topic?name=r", &tp)
	require.InDelta(t, 5.0, tp.Queues[0].Rate, 0.001)
}

// TestDashboardTrace: the trace view lists a traced message's steps, and
// says 404 when the store keeps no trace.
func TestDashboardTrace(t *testing.T) {
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true, MessageTrace: true})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	r, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Keys: []string{evil}, Body: []byte("x")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	srv := serve(t, s, nil)
	var tp TracePage
	getJSON(t, srv.URL+"/api/trace?id="+r.MsgID(), &tp)
	require.Len(t, tp.Events, 2)
	require.Equal(t, mqlite.TraceStored, tp.Events[0].Type)
	require.Equal(t, mqlite.TraceSent, tp.Events[1].Type)
	code, body := get(t, srv.URL+"/trace?id="+r.MsgID())
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 2, strings.Count(body, `<tr class="step"`))
	require.Contains(t, body, `data-type="sent"`)

	f := newFixture(t)
	plain := serve(t, f.s, nil)
	code, _ = get(t, plain.URL+"/api/trace?id="+f.evilID)
	require.Equal(t, http.StatusNotFound, code)
}
