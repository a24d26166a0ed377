package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/message"
)

// previewLen is how many characters of a body a table shows.
const previewLen = 40

// farFuture is the default end of a query's time range.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

func runGet(e *env, args []string) int {
	id := args[0]
	if _, err := message.ParseID(id); err != nil {
		return e.usageErr("%q is not a message ID: it %s (an ID is the 16 upper-case hex digits Put and Send return)", id, idProblem(id, err))
	}
	return e.withStore(func(s *mqlite.Store) int {
		m, err := s.MessageByID(id)
		if err != nil {
			return e.fail(exitProblem, "message "+id, err)
		}
		if e.json {
			return e.printJSON(toJSON(m))
		}
		printMessage(e.stdout, m)
		return exitOK
	})
}

// listFlags are the output flags of the commands that list messages.
func listFlags(fs *flag.FlagSet) (full *bool) {
	return fs.Bool("full", false, "print each message in full, as get does, instead of a table")
}

// printList prints messages as a table, in full, or as JSON.
func (e *env) printList(ms []*mqlite.MessageExt, full bool) int {
	if e.json {
		return e.printJSON(toJSONList(ms))
	}
	if full {
		for i, m := range ms {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			printMessage(e.stdout, m)
		}
		return exitOK
	}
	t := newTable(e.stdout, "QUEUE", "OFFSET", "MSGID", "STORED", "TAGS", "KEYS", "BODY")
	for _, m := range ms {
		t.row(m.QueueID, m.QueueOffset, m.MsgID, fmtTime(m.StoreTimestamp), orDash(m.Tags),
			orDash(strings.Join(m.Keys, ",")), preview(m.Body, previewLen))
	}
	t.flush()
	return exitOK
}

func queryCmd(fs *flag.FlagSet) runner {
	topic := fs.String("topic", "", "`topic` (required)")
	key := fs.String("key", "", "message `key` or unique key (required)")
	from := fs.String("from", "", "stored at or after this `time` (RFC 3339; default: any)")
	to := fs.String("to", "", "stored at or before this `time` (RFC 3339; default: any)")
	maxN := fs.Int("max", 32, fmt.Sprintf("at most `n` messages (1..%d)", mqlite.MaxKeyResults))
	full := listFlags(fs)
	return func(e *env, _ []string) int {
		if *topic == "" || *key == "" {
			return e.usageErr("-topic and -key are required")
		}
		if *maxN < 1 || *maxN > mqlite.MaxKeyResults {
			return e.usageErr("-max %d outside 1..%d", *maxN, mqlite.MaxKeyResults)
		}
		start, end := time.UnixMilli(0), farFuture
		var err error
		if *from != "" {
			if start, err = parseTime("from", *from); err != nil {
				return e.usageErr("%v", err)
			}
		}
		if *to != "" {
			if end, err = parseTime("to", *to); err != nil {
				return e.usageErr("%v", err)
			}
		}
		if end.Before(start) {
			return e.usageErr("-to %s is before -from %s", *to, *from)
		}
		return e.withStore(func(s *mqlite.Store) int {
			ms, err := s.MessagesByKey(*topic, *key, start, end, *maxN)
			if err != nil {
				code := exitProblem
				if errors.Is(err, mqlite.ErrInvalidArgument) {
					code = exitUsage
				}
				return e.fail(code, fmt.Sprintf("query %s key %q", *topic, *key), err)
			}
			code := e.printList(ms, *full)
			if len(ms) == 0 && code == exitOK {
				fmt.Fprintf(e.stderr, "mqlite query: no message of topic %s with key %q\n", *topic, *key)
				return exitProblem
			}
			return code
		})
	}
}

// queueFlags are the flags naming a topic's queues.
type queueFlags struct {
	topic *string
	queue *int
}

func addQueueFlags(fs *flag.FlagSet) queueFlags {
	return queueFlags{fs.String("topic", "", "`topic` (required)"), fs.Int("queue", -1, "queue `id`; -1: every queue of the topic")}
}

// queues resolves the topic's queues that hold messages, without creating
// any. It returns an exit status when it failed (and said why).
func (q queueFlags) queues(e *env, s *mqlite.Store) ([]mqlite.QueueStats, int) {
	st, err := s.Stats()
	if err != nil {
		return nil, e.fail(exitUsage, "read stats", err)
	}
	for _, ts := range st.Topics {
		if ts.Name != *q.topic {
			continue
		}
		if *q.queue >= len(ts.Queues) {
			return nil, e.usageErr("-queue %d outside 0..%d of topic %s", *q.queue, len(ts.Queues)-1, ts.Name)
		}
		var out []mqlite.QueueStats
		for _, qs := range ts.Queues {
			if (*q.queue < 0 || qs.ID == *q.queue) && qs.Messages > 0 {
				out = append(out, qs)
			}
		}
		return out, exitOK
	}
	return nil, e.fail(exitProblem, "topic "+*q.topic, mqlite.ErrTopicNotFound)
}

func (q queueFlags) check(e *env) int {
	if *q.topic == "" {
		return e.usageErr("-topic is required")
	}
	if *q.queue < -1 {
		return e.usageErr("-queue %d is negative", *q.queue)
	}
	return exitOK
}

// readQueues reads up to n messages of each queue, from the offset start
// returns for it, and prints them.
func (e *env) readQueues(q queueFlags, n int, full bool, start func(s *mqlite.Store, qs mqlite.QueueStats) (int64, error)) int {
	return e.withStore(func(s *mqlite.Store) int {
		queues, code := q.queues(e, s)
		if code != exitOK {
			return code
		}
		var out []*mqlite.MessageExt
		var readErr error
		for _, qs := range queues {
			from, err := start(s, qs)
			if err != nil {
				readErr = fmt.Errorf("queue %d: %w", qs.ID, err)
				break
			}
			got := 0
			for m, err := range s.Messages(*q.topic, qs.ID, from) {
				if err != nil {
					readErr = fmt.Errorf("queue %d: %w", qs.ID, err)
					break
				}
				out = append(out, m)
				if got++; got == n {
					break
				}
			}
			if readErr != nil {
				break
			}
		}
		code = e.printList(out, full)
		if readErr != nil {
			return e.fail(exitProblem, "read topic "+*q.topic, readErr)
		}
		return code
	})
}

// checkN is check for a command that reads up to n messages a queue.
func (q queueFlags) checkN(e *env, n int) int {
	if code := q.check(e); code != exitOK {
		return code
	}
	if n < 1 {
		return e.usageErr("-n %d: want at least 1", n)
	}
	return exitOK
}

func printCmd(fs *flag.FlagSet) runner {
	q := addQueueFlags(fs)
	offset := fs.Int64("offset", -1, "first queue `offset`; -1: the queue's first")
	at := fs.String("time", "", "start at the first message stored at or after this `time` (RFC 3339)")
	n := fs.Int("n", 32, "at most `n` messages per queue")
	full := listFlags(fs)
	return func(e *env, _ []string) int {
		if code := q.checkN(e, *n); code != exitOK {
			return code
		}
		if *offset >= 0 && *at != "" {
			return e.usageErr("-offset and -time exclude each other")
		}
		var t time.Time
		if *at != "" {
			var err error
			if t, err = parseTime("time", *at); err != nil {
				return e.usageErr("%v", err)
			}
		}
		return e.readQueues(q, *n, *full, func(s *mqlite.Store, qs mqlite.QueueStats) (int64, error) {
			if *at != "" {
				return s.OffsetForTime(*q.topic, qs.ID, t)
			}
			return max(*offset, qs.MinOffset), nil
		})
	}
}

func tailCmd(fs *flag.FlagSet) runner {
	q := addQueueFlags(fs)
	n := fs.Int("n", 10, "the last `n` messages of each queue")
	full := listFlags(fs)
	return func(e *env, _ []string) int {
		if code := q.checkN(e, *n); code != exitOK {
			return code
		}
		return e.readQueues(q, *n, *full, func(_ *mqlite.Store, qs mqlite.QueueStats) (int64, error) {
			return max(qs.MaxOffset-int64(*n), qs.MinOffset), nil
		})
	}
}

// idProblem is what ParseID's error says is wrong with id, without the
// sentinels' text and the id in front.
func idProblem(id string, err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "malformed message ID: "); i >= 0 {
		s = s[i+len("malformed message ID: "):]
	}
	return strings.TrimPrefix(s, strconv.Quote(id)+" ")
}
