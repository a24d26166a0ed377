package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/consumer"
)

// topicRow is a topic as "topics -json" prints it.
type topicRow struct {
	Name     string
	Queues   int
	System   bool
	Deleted  bool `json:",omitempty"` // deleted, but messages remain
	Messages int64
	Created  *time.Time `json:",omitempty"`
}

func runTopics(e *env, _ []string) int {
	return e.withStore(func(s *mqlite.Store) int {
		st, err := s.Stats()
		if err != nil {
			return e.fail(exitUsage, "read stats", err)
		}
		created := map[string]time.Time{}
		for _, ti := range s.Topics() {
			created[ti.Name] = ti.Created
		}
		rows := make([]topicRow, 0, len(st.Topics))
		for _, ts := range st.Topics {
			r := topicRow{Name: ts.Name, Queues: len(ts.Queues), System: ts.System, Deleted: ts.Deleted, Messages: ts.Messages}
			if c, ok := created[ts.Name]; ok && !c.IsZero() {
				r.Created = &c
			}
			rows = append(rows, r)
		}
		if e.json {
			return e.printJSON(rows)
		}
		t := newTable(e.stdout, "TOPIC", "QUEUES", "SYSTEM", "MESSAGES")
		for _, r := range rows {
			name := r.Name
			if r.Deleted {
				name += " (deleted)"
			}
			t.row(name, r.Queues, yesNo(r.System), r.Messages)
		}
		t.flush()
		return exitOK
	})
}

func statsCmd(fs *flag.FlagSet) runner {
	all := fs.Bool("all", false, "also list queues that never received a message")
	return func(e *env, _ []string) int { return runStats(e, *all) }
}

func runStats(e *env, all bool) int {
	return e.withStore(func(s *mqlite.Store) int {
		st, err := s.Stats()
		if err != nil {
			return e.fail(exitUsage, "read stats", err)
		}
		e.warnDamage(s)
		if e.json {
			return e.printJSON(st)
		}
		cl := st.CommitLog
		w := e.stdout
		t := newTable(w, "COMMITLOG", "MIN", "WROTE", "FLUSHED", "DISPATCHED", "DISPATCH-LAG")
		t.row("", cl.MinOffset, cl.WrotePosition, cl.FlushedPosition, cl.DispatchedPosition, cl.DispatchLag)
		t.flush()
		fmt.Fprintf(w, "\npending transactions: %d\n\n", st.PendingTransactions)
		t = newTable(w, "TOPIC", "QUEUE", "MIN", "MAX", "MESSAGES")
		for _, ts := range st.Topics {
			for _, q := range ts.Queues {
				if all || q.MaxOffset > 0 {
					t.row(ts.Name, q.ID, q.MinOffset, q.MaxOffset, q.Messages)
				}
			}
		}
		t.flush()
		fmt.Fprintln(w)
		t = newTable(w, "GROUP", "LAG")
		for _, g := range st.Groups {
			t.row(g.Name, g.Lag)
		}
		t.flush()
		return exitOK
	})
}

// groupRow is a consumer group as "consumers -json" prints it.
type groupRow struct {
	Name              string
	Model             string
	Strategy          string
	ConsumeFromWhere  string
	Orderly           bool
	MaxReconsumeTimes int
	Subscriptions     []string
	Members           []consumer.MemberInfo
	Lag               int64
	Queues            []mqlite.QueueLag
}

func consumersCmd(fs *flag.FlagSet) runner {
	group := fs.String("group", "", "only this `group`")
	return func(e *env, _ []string) int { return runConsumers(e, *group) }
}

func runConsumers(e *env, only string) int {
	return e.withStore(func(s *mqlite.Store) int {
		var rows []groupRow
		for _, g := range s.ConsumerGroups() {
			if only != "" && g.Name != only {
				continue
			}
			lag, err := s.ConsumerLag(g.Name)
			if errors.Is(err, mqlite.ErrGroupNotFound) {
				continue
			}
			if err != nil {
				return e.fail(exitUsage, "lag of group "+g.Name, err)
			}
			r := groupRow{Name: g.Name, Model: g.Model.String(), Strategy: g.Strategy.String(),
				ConsumeFromWhere: g.ConsumeFromWhere.String(), Orderly: g.Orderly, MaxReconsumeTimes: g.MaxReconsumeTimes,
				Subscriptions: []string{}, Members: g.Members, Queues: lag}
			for _, sub := range g.Subscriptions {
				r.Subscriptions = append(r.Subscriptions, subscription(sub))
			}
			for _, l := range lag {
				r.Lag += l.Lag
			}
			rows = append(rows, r)
		}
		if only != "" && len(rows) == 0 {
			return e.fail(exitProblem, "group "+only, mqlite.ErrGroupNotFound)
		}
		if e.json {
			if rows == nil {
				rows = []groupRow{}
			}
			return e.printJSON(rows)
		}
		t := newTable(e.stdout, "GROUP", "MODEL", "MEMBERS", "SUBSCRIPTIONS", "LAG")
		for _, r := range rows {
			t.row(r.Name, r.Model, len(r.Members), orDash(strings.Join(r.Subscriptions, " ")), r.Lag)
		}
		t.flush()
		fmt.Fprintln(e.stdout)
		t = newTable(e.stdout, "GROUP", "TOPIC", "QUEUE", "INSTANCE", "COMMITTED", "MAX", "LAG")
		for _, r := range rows {
			for _, l := range r.Queues {
				committed := "-"
				if l.Committed >= 0 {
					committed = fmt.Sprint(l.Committed)
				}
				t.row(r.Name, l.Topic, l.ID, orDash(l.Instance), committed, l.MaxOffset, l.Lag)
			}
		}
		t.flush()
		return exitOK
	})
}

// subscription prints a subscription as "topic" or "topic(TYPE expr)".
func subscription(s consumer.Subscription) string {
	if s.Expression == "" || s.Expression == "*" {
		return s.Topic
	}
	return fmt.Sprintf("%s(%s %s)", s.Topic, s.FilterType, s.Expression)
}

// warnDamage says on stderr which damaged CommitLog ranges a read-only
// Open read past (RecoveryReport.DamagedRanges): the figures count the
// records around them, and verify says what was lost.
func (e *env) warnDamage(s *mqlite.Store) {
	for _, r := range s.Recovery().DamagedRanges {
		fmt.Fprintf(e.stderr, "mqlite %s: warning: the CommitLog is damaged at offsets [%d, %d) (read past; run mqlite verify)\n",
			e.cmd, r[0], r[1])
	}
}
