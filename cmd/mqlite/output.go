package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mqlite/mqlite"
)

// timeLayout prints times with milliseconds, like the store keeps them.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// printJSON writes v as one indented JSON document.
func (e *env) printJSON(v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return e.fail(exitUsage, "write JSON", err)
	}
	return exitOK
}

// table is a tabwriter with a header row.
type table struct{ w *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(anySlice(header)...)
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(t.w, "\t")
		}
		fmt.Fprint(t.w, c)
	}
	io.WriteString(t.w, "\n")
}

func (t *table) flush() { t.w.Flush() }

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(timeLayout)
}

// parseTime parses an RFC 3339 time flag.
func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, fmt.Errorf("-%s %q is not an RFC 3339 time (like 2006-01-02T15:04:05Z07:00)", name, v)
	}
	return t, nil
}

// jsonMessage is a message as --json prints it (Body in base64).
type jsonMessage struct {
	MsgID           string
	Topic           string
	QueueID         int
	QueueOffset     int64
	CommitLogOffset int64
	StoreSize       int32
	StoreTime       time.Time
	BornTime        time.Time
	Tags            string            `json:",omitempty"`
	Keys            []string          `json:",omitempty"`
	UniqKey         string            `json:",omitempty"`
	ShardingKey     string            `json:",omitempty"`
	Flag            int32             `json:",omitempty"`
	ReconsumeTimes  int32             `json:",omitempty"`
	SysFlag         uint32            `json:",omitempty"`
	DelayLevel      int               `json:",omitempty"`
	DeliverAt       *time.Time        `json:",omitempty"`
	Properties      map[string]string `json:",omitempty"`
	Body            []byte
}

func toJSON(m *mqlite.MessageExt) jsonMessage {
	j := jsonMessage{MsgID: m.MsgID, Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset,
		CommitLogOffset: m.CommitLogOffset, StoreSize: m.StoreSize, StoreTime: m.StoreTimestamp,
		BornTime: m.BornTimestamp, Tags: m.Tags, Keys: m.Keys, UniqKey: m.UniqKey, ShardingKey: m.ShardingKey,
		Flag: m.Flag, ReconsumeTimes: m.ReconsumeTimes, SysFlag: m.SysFlag, DelayLevel: m.DelayLevel,
		Properties: m.Properties, Body: m.Body}
	if !m.DeliverAt.IsZero() {
		j.DeliverAt = &m.DeliverAt
	}
	return j
}

func toJSONList(ms []*mqlite.MessageExt) []jsonMessage {
	out := make([]jsonMessage, len(ms))
	for i, m := range ms {
		out[i] = toJSON(m)
	}
	return out
}

// printMessage writes one message in full, human-readable.
func printMessage(w io.Writer, m *mqlite.MessageExt) {
	t := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	field := func(name string, v any) { fmt.Fprintf(t, "%s:\t%v\n", name, v) }
	field("MsgID", m.MsgID)
	field("Topic", m.Topic)
	field("Queue", m.QueueID)
	field("QueueOffset", m.QueueOffset)
	field("CommitLogOffset", m.CommitLogOffset)
	field("StoreSize", m.StoreSize)
	field("StoreTime", fmtTime(m.StoreTimestamp))
	field("BornTime", fmtTime(m.BornTimestamp))
	field("Tags", orDash(m.Tags))
	field("Keys", orDash(strings.Join(m.Keys, " ")))
	field("UniqKey", orDash(m.UniqKey))
	if m.ShardingKey != "" {
		field("ShardingKey", m.ShardingKey)
	}
	if m.DelayLevel != 0 {
		field("DelayLevel", m.DelayLevel)
	}
	if !m.DeliverAt.IsZero() {
		field("DeliverAt", fmtTime(m.DeliverAt))
	}
	field("Flag", m.Flag)
	field("ReconsumeTimes", m.ReconsumeTimes)
	field("SysFlag", fmt.Sprintf("%#x", m.SysFlag))
	t.Flush()
	if len(m.Properties) == 0 {
		fmt.Fprintln(w, "Properties: -")
	} else {
		fmt.Fprintln(w, "Properties:")
		for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
			fmt.Fprintf(w, "  %s=%s\n", k, m.Properties[k])
		}
	}
	if isText(m.Body) {
		fmt.Fprintf(w, "Body (%d bytes, text):\n%s\n", len(m.Body), m.Body)
	} else {
		fmt.Fprintf(w, "Body (%d bytes, hex):\n%s", len(m.Body), hex.Dump(m.Body))
	}
}

// isText reports whether b is valid UTF-8 made of printable characters
// and ordinary whitespace.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// preview is a one-line excerpt of a body for tables: quoted text, or hex.
func preview(b []byte, n int) string {
	if isText(b) {
		s := string(b)
		if utf8.RuneCountInString(s) > n {
			s = string([]rune(s)[:n]) + "..."
		}
		return strconv.Quote(s)
	}
	if len(b) > n/2 {
		return "0x" + hex.EncodeToString(b[:n/2]) + "..."
	}
	return "0x" + hex.EncodeToString(b)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
