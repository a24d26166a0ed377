package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is a whole run: the machine's limits, one row per (workload,
// system), and the crash test.
type Report struct {
	Meta     Meta
	Limits   []Limit
	Rows     []Result // produce, consume and latency rows, in run order
	Recovery *Result  `json:",omitempty"`
	Errors   []Result `json:",omitempty"` // limits or recovery jobs that failed
}

// Meta describes the run.
type Meta struct {
	Preset    string // "quick" or "full"
	Started   time.Time
	Elapsed   time.Duration
	GoVersion string
	OS, Arch  string
	CPUs      int
	Kernel    string
}

func (rep *Report) add(r Result) {
	switch {
	case r.Job.Kind == KindLimits && r.Err == "":
		rep.Limits = r.Limits
	case r.Job.Kind == KindRecovery && r.Err == "":
		rep.Recovery = &r
	case r.Job.Kind == KindLimits || r.Job.Kind == KindRecovery:
		rep.Errors = append(rep.Errors, r)
	default:
		rep.Rows = append(rep.Rows, r)
	}
}

// Failed lists the rows and jobs that ended in an error.
func (rep *Report) Failed() []Result {
	out := append([]Result(nil), rep.Errors...)
	for _, r := range rep.Rows {
		if r.Err != "" {
			out = append(out, r)
		}
	}
	return out
}

// Ratios maps each row (by index) to its msgs/s divided by mqlite's in
// the same workload (the first mqlite row of the workload: in consume
// rows, its push consumer); rows without an mqlite figure are absent.
func (rep *Report) Ratios() map[int]float64 {
	base := map[string]float64{}
	for _, r := range rep.Rows {
		if _, ok := base[r.Job.Workload()]; !ok && r.Job.System == "mqlite" && r.Err == "" {
			base[r.Job.Workload()] = r.MsgsPerSec()
		}
	}
	out := map[int]float64{}
	for i, r := range rep.Rows {
		if b := base[r.Job.Workload()]; b > 0 && r.Err == "" {
			out[i] = r.MsgsPerSec() / b
		}
	}
	return out
}

// Table is a Markdown table; Right marks right-aligned (numeric) columns.
type Table struct {
	Header []string
	Right  []bool
	Rows   [][]string
}

// Write prints t as a Markdown table padded to aligned columns, so it
// reads in a terminal too. Pipes in cells are escaped.
func (t *Table) Write(w io.Writer) error {
	cells := append([][]string{t.Header}, t.Rows...)
	width := make([]int, len(t.Header))
	for _, row := range cells {
		for i, c := range row {
			row[i] = strings.ReplaceAll(c, "|", `\|`)
			width[i] = max(width[i], len([]rune(row[i])), 3)
		}
	}
	var b strings.Builder
	line := func(row []string) {
		b.WriteString("|")
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i < len(t.Right) && t.Right[i] {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			} else {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			}
		}
		b.WriteString("\n")
	}
	line(cells[0])
	b.WriteString("|")
	for i, wd := range width {
		if i < len(t.Right) && t.Right[i] {
			b.WriteString(" " + strings.Repeat("-", wd-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", wd) + " |")
		}
	}
	b.WriteString("\n")
	for _, row := range cells[1:] {
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtRate(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fK", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtMB(v float64) string {
	if v <= 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtMiB(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// LimitsTable is the machine-limits table.
func (rep *Report) LimitsTable() *Table {
	t := &Table{Header: []string{"probe", "MB/s", "ops/s", "p50", "p99", "note"},
		Right: []bool{false, true, true, true, true, false}}
	for _, l := range rep.Limits {
		t.Rows = append(t.Rows, []string{l.Name, fmtMB(l.MBPerSec), fmtRate(l.OpsPerSec), fmtDur(l.P50), fmtDur(l.P99), l.Note})
	}
	return t
}

// ThroughputTable has the produce and consume rows.
func (rep *Report) ThroughputTable() *Table {
	t := &Table{Header: []string{"workload", "system", "msgs", "msgs/s", "MB/s", "vs mqlite", "p50", "p99",
		"GCs", "peak RSS", "peak anon", "durability (what an ack means)"},
		Right: []bool{false, false, true, true, true, true, true, true, true, true, true, false}}
	ratios := rep.Ratios()
	for i, r := range rep.Rows {
		if r.Job.Kind != KindProduce && r.Job.Kind != KindConsume {
			continue
		}
		if r.Err != "" {
			t.Rows = append(t.Rows, []string{r.Job.Workload(), r.Job.SystemLabel(), "error", "", "", "", "", "", "", "", "", r.Err})
			continue
		}
		ratio := "-"
		if v, ok := ratios[i]; ok {
			ratio = fmt.Sprintf("%.2f", v)
		}
		msgs := fmt.Sprint(r.Msgs)
		if r.Job.Kind == KindProduce && r.Msgs < int64(r.Job.Count) {
			msgs += fmt.Sprintf(" (%s cap)", r.Job.Limit)
		}
		dur := r.Durability
		if r.Job.Mode == Sync && r.Syncs > 0 {
			dur += fmt.Sprintf("; %.1f msgs per sync", float64(r.Msgs)/float64(r.Syncs))
		}
		t.Rows = append(t.Rows, []string{r.Job.Workload(), r.Job.SystemLabel(), msgs, fmtRate(r.MsgsPerSec()),
			fmtMB(r.MBPerSec()), ratio, fmtDur(r.P50), fmtDur(r.P99), fmt.Sprint(r.GCs), fmtMiB(r.PeakRSS), fmtMiB(r.PeakAnon), dur})
	}
	return t
}

// LatencyTable has the steady-rate latency rows.
func (rep *Report) LatencyTable() *Table {
	t := &Table{Header: []string{"workload", "system", "msgs", "sent/s", "p50", "p99", "max", "peak RSS",
		"peak anon", "durability (what an ack means)"},
		Right: []bool{false, false, true, true, true, true, true, true, true, false}}
	for _, r := range rep.Rows {
		if r.Job.Kind != KindLatency {
			continue
		}
		if r.Err != "" {
			t.Rows = append(t.Rows, []string{r.Job.Workload(), r.Job.SystemLabel(), "error", "", "", "", "", "", "", r.Err})
			continue
		}
		t.Rows = append(t.Rows, []string{r.Job.Workload(), r.Job.SystemLabel(), fmt.Sprint(r.Msgs), fmtRate(r.MsgsPerSec()),
			fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.Max), fmtMiB(r.PeakRSS), fmtMiB(r.PeakAnon), r.Durability})
	}
	return t
}

// RecoveryTable has the crash test's one row.
func (rep *Report) RecoveryTable() *Table {
	t := &Table{Header: []string{"CommitLog", "messages", "Open", "first read", "re-dispatched", "truncated",
		"checkpoint", "lookups (hits)", "lookup p50", "lookup p99", "lookup mean", "peak RSS"},
		Right: []bool{true, true, true, true, true, true, false, true, true, true, true, true}}
	if r := rep.Recovery; r != nil && r.Recovery != nil {
		rr := r.Recovery
		t.Rows = append(t.Rows, []string{fmtMiB(rr.CommitLogBytes), fmt.Sprint(rr.Messages), fmtDur(rr.Open),
			fmtDur(rr.FirstRead), fmt.Sprintf("%.0f MB", rr.RedispatchedMB), fmt.Sprintf("%d B", rr.TruncatedBytes),
			fmt.Sprint(rr.CheckpointFound), fmt.Sprintf("%d (%d)", rr.Lookups, rr.Hits), fmtDur(rr.LookupP50),
			fmtDur(rr.LookupP99), fmtDur(rr.LookupMean), fmtMiB(r.PeakRSS)})
	}
	return t
}
