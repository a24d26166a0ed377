package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mqlite/mqlite"
)

// Pager says which slice of a list a page shows.
type Pager struct {
	Page  int `json:"page"`  // 0-based
	Pages int `json:"pages"` // at least 1
	Total int `json:"total"` // rows in the whole list
	Size  int `json:"size"`  // rows per page
}

// pager reads ?page= for a list of n rows and returns the bounds of the
// page's rows.
func (h *Handler) pager(r *http.Request, n int) (Pager, int, int, error) {
	p := Pager{Total: n, Size: h.o.PageSize, Pages: max(1, (n+h.o.PageSize-1)/h.o.PageSize)}
	if v := r.URL.Query().Get("page"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= p.Pages {
			return p, 0, 0, fmt.Errorf("mqlite/dashboard: page %q outside 0..%d: %w", v, p.Pages-1, mqlite.ErrInvalidArgument)
		}
		p.Page = i
	}
	lo := p.Page * p.Size
	return p, lo, min(n, lo+p.Size), nil
}

// Overview is the store page.
type Overview struct {
	CommitLog  mqlite.CommitLogStats  `json:"commitLog"`
	Throughput mqlite.ThroughputStats `json:"throughput"`
	Disk       mqlite.DiskStats       `json:"disk"`
	Topics     int                    `json:"topics"`
	Groups     int                    `json:"groups"`
	Pending    int                    `json:"pendingTransactions"`
	HookPanics int64                  `json:"hookPanics"`
}

func (h *Handler) overview(*http.Request) (any, error) {
	st, err := h.s.Stats()
	if err != nil {
		return nil, err
	}
	return Overview{CommitLog: st.CommitLog, Throughput: st.Throughput, Disk: st.Disk, Topics: len(st.Topics),
		Groups: len(st.Groups), Pending: st.PendingTransactions, HookPanics: st.HookPanics}, nil
}

// TopicRow is one topic of the topics page.
type TopicRow struct {
	Name     string  `json:"name"`
	System   bool    `json:"system"`
	Queues   int     `json:"queues"`
	Messages int64   `json:"messages"`
	Rate     float64 `json:"putsPerSecond"` // since the previous view, 0 on the first
}

// TopicList is the topics page.
type TopicList struct {
	Pager  Pager      `json:"pager"`
	Topics []TopicRow `json:"topics"`
}

func (h *Handler) topics(r *http.Request) (any, error) {
	all := h.s.Topics()
	pg, lo, hi, err := h.pager(r, len(all))
	if err != nil {
		return nil, err
	}
	out := TopicList{Pager: pg, Topics: []TopicRow{}}
	for _, ti := range all[lo:hi] {
		row := TopicRow{Name: ti.Name, System: ti.System, Queues: ti.Config.Queues}
		var end int64
		for q := range ti.Config.Queues {
			lo, hi := h.offsets(ti.Name, q)
			row.Messages += hi - lo
			end += hi
		}
		row.Rate = h.rates.rate("t\x00"+ti.Name, end)
		out.Topics = append(out.Topics, row)
	}
	return out, nil
}

// offsets are a queue's min and max offsets (0, 0 for one never written).
func (h *Handler) offsets(topic string, q int) (int64, int64) {
	lo, err1 := h.s.MinOffset(topic, q)
	hi, err2 := h.s.MaxOffset(topic, q)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return lo, hi
}

// QueueRow is one queue of a topic page.
type QueueRow struct {
	ID        int     `json:"id"`
	MinOffset int64   `json:"minOffset"`
	MaxOffset int64   `json:"maxOffset"`
	Messages  int64   `json:"messages"`
	Rate      float64 `json:"putsPerSecond"`
}

// TopicPage is a topic's queues.
type TopicPage struct {
	Name   string     `json:"name"`
	Pager  Pager      `json:"pager"`
	Queues []QueueRow `json:"queues"`
}

func (h *Handler) topic(r *http.Request) (any, error) {
	name := r.URL.Query().Get("name")
	cfg, err := h.s.Topic(name)
	if err != nil {
		return nil, err
	}
	pg, lo, hi, err := h.pager(r, cfg.Queues)
	if err != nil {
		return nil, err
	}
	out := TopicPage{Name: name, Pager: pg, Queues: []QueueRow{}}
	for q := lo; q < hi; q++ {
		mn, mx := h.offsets(name, q)
		out.Queues = append(out.Queues, QueueRow{ID: q, MinOffset: mn, MaxOffset: mx, Messages: mx - mn,
			Rate: h.rates.rate("q\x00"+name+"\x00"+strconv.Itoa(q), mx)})
	}
	return out, nil
}

// GroupRow is one group of the groups page.
type GroupRow struct {
	Name    string   `json:"name"`
	Model   string   `json:"model"`
	Topics  []string `json:"topics"`
	Members []string `json:"members"`
	Lag     int64    `json:"lag"`
	Dead    int64    `json:"deadLetters"`
}

// GroupList is the groups page.
type GroupList struct {
	Pager  Pager      `json:"pager"`
	Groups []GroupRow `json:"groups"`
}

func (h *Handler) groups(r *http.Request) (any, error) {
	all := h.s.ConsumerGroups()
	pg, lo, hi, err := h.pager(r, len(all))
	if err != nil {
		return nil, err
	}
	out := GroupList{Pager: pg, Groups: []GroupRow{}}
	for _, g := range all[lo:hi] {
		row, err := h.groupRow(g)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, row)
	}
	return out, nil
}

func (h *Handler) groupRow(g mqlite.GroupInfo) (GroupRow, error) {
	row := GroupRow{Name: g.Name, Model: g.Model.String(), Topics: []string{}, Members: []string{}}
	for _, s := range g.Subscriptions {
		row.Topics = append(row.Topics, s.Topic)
	}
	for _, m := range g.Members {
		row.Members = append(row.Members, m.ID)
	}
	lag, err := h.s.ConsumerLag(g.Name)
	if err != nil {
		return row, err
	}
	for _, l := range lag {
		row.Lag += l.Lag
	}
	lo, hi := h.offsets("%DLQ%"+g.Name, 0)
	row.Dead = hi - lo
	return row, nil
}

// LagRow is one queue of a group page.
type LagRow struct {
	Topic     string `json:"topic"`
	Queue     int    `json:"queue"`
	Instance  string `json:"instance,omitempty"`
	Committed int64  `json:"committed"`
	MaxOffset int64  `json:"maxOffset"`
	Lag       int64  `json:"lag"`
}

// GroupPage is a group's lag per queue and its members.
type GroupPage struct {
	GroupRow
	Pager  Pager    `json:"pager"`
	Queues []LagRow `json:"queues"`
}

func (h *Handler) group(r *http.Request) (any, error) {
	name := r.URL.Query().Get("name")
	var info *mqlite.GroupInfo
	for _, g := range h.s.ConsumerGroups() {
		if g.Name == name {
			info = &g
			break
		}
	}
	if info == nil {
		return nil, fmt.Errorf("mqlite/dashboard: consumer group %q: %w", name, mqlite.ErrNotFound)
	}
	row, err := h.groupRow(*info)
	if err != nil {
		return nil, err
	}
	lag, err := h.s.ConsumerLag(name)
	if err != nil {
		return nil, err
	}
	pg, lo, hi, err := h.pager(r, len(lag))
	if err != nil {
		return nil, err
	}
	out := GroupPage{GroupRow: row, Pager: pg, Queues: []LagRow{}}
	for _, l := range lag[lo:hi] {
		out.Queues = append(out.Queues, LagRow{Topic: l.Topic, Queue: l.ID, Instance: l.Instance, Committed: l.Committed, MaxOffset: l.MaxOffset, Lag: l.Lag})
	}
	return out, nil
}

// Msg is a message as the dashboard shows it.
type Msg struct {
	ID             string            `json:"id"`
	Topic          string            `json:"topic"`
	Queue          int               `json:"queue"`
	QueueOffset    int64             `json:"queueOffset"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	UniqKey        string            `json:"uniqKey"`
	Properties     map[string]string `json:"properties,omitempty"`
	PropertyNames  []string          `json:"-"`
	Reconsumes     int32             `json:"reconsumeTimes"`
	BornTime       time.Time         `json:"bornTime"`
	StoreTime      time.Time         `json:"storeTime"`
	Body           string            `json:"body"` // up to bodyShown bytes
	BodyLen        int               `json:"bodyLength"`
	BodyTruncated  bool              `json:"bodyTruncated,omitempty"`
	OriginalTopic  string            `json:"originalTopic,omitempty"` // dead letters
	CommitLogStart int64             `json:"commitLogOffset"`
}

const bodyShown = 4096

func toMsg(m *mqlite.MessageExt) Msg {
	b := m.Body
	out := Msg{ID: m.MsgID, Topic: m.Topic, Queue: m.QueueID, QueueOffset: m.QueueOffset, Tags: m.Tags, Keys: m.Keys,
		UniqKey: m.UniqKey, Properties: m.Properties, Reconsumes: m.ReconsumeTimes, BornTime: m.BornTimestamp,
		StoreTime: m.StoreTimestamp, BodyLen: len(b), OriginalTopic: m.Properties[mqlite.PropRetryTopic],
		CommitLogStart: m.CommitLogOffset}
	if len(b) > bodyShown {
		b, out.BodyTruncated = b[:bodyShown], true
	}
	out.Body = string(b)
	out.PropertyNames = slices.Sorted(maps.Keys(m.Properties))
	return out
}

// DLQPage is a page of a group's dead letters.
type DLQPage struct {
	Group    string `json:"group"`
	From     int64  `json:"from"`
	Next     int64  `json:"next"` // ?from= of the next page; -1 after the last
	Messages []Msg  `json:"messages"`
}

func (h *Handler) dlq(r *http.Request) (any, error) {
	q := r.URL.Query()
	group := q.Get("group")
	var from int64
	if v := q.Get("from"); v != "" {
		var err error
		if from, err = strconv.ParseInt(v, 10, 64); err != nil || from < 0 {
			return nil, fmt.Errorf("mqlite/dashboard: from %q: %w", v, mqlite.ErrInvalidArgument)
		}
	}
	ms, err := h.s.DeadLetters(group, from, h.o.PageSize+1)
	if err != nil {
		return nil, err
	}
	out := DLQPage{Group: group, From: from, Next: -1, Messages: []Msg{}}
	if len(ms) > h.o.PageSize {
		out.Next = ms[h.o.PageSize].QueueOffset
		ms = ms[:h.o.PageSize]
	}
	for _, m := range ms {
		out.Messages = append(out.Messages, toMsg(m))
	}
	return out, nil
}

func (h *Handler) message(r *http.Request) (any, error) {
	id := r.URL.Query().Get("id")
	m, err := h.s.MessageByID(id)
	if err != nil {
		return nil, err
	}
	return toMsg(m), nil
}

// SearchPage is a lookup by key.
type SearchPage struct {
	Topic    string `json:"topic"`
	Key      string `json:"key"`
	Messages []Msg  `json:"messages"`
}

func (h *Handler) search(r *http.Request) (any, error) {
	q := r.URL.Query()
	out := SearchPage{Topic: q.Get("topic"), Key: q.Get("key"), Messages: []Msg{}}
	ms, err := h.s.MessagesByKey(out.Topic, out.Key, time.Unix(0, 0), h.o.Clock.Now().Add(time.Hour), min(h.o.PageSize, mqlite.MaxKeyResults))
	if err != nil {
		return out, err
	}
	for _, m := range ms {
		out.Messages = append(out.Messages, toMsg(m))
	}
	return out, nil
}

// TracePage is a message's life from the message trace.
type TracePage struct {
	ID     string              `json:"id"`
	Events []mqlite.TraceEvent `json:"events"`
}

func (h *Handler) trace(r *http.Request) (any, error) {
	id := r.URL.Query().Get("id")
	evs, err := h.s.Trace(id)
	if err != nil {
		return nil, err
	}
	return TracePage{ID: id, Events: evs}, nil
}
