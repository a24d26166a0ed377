package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Run runs every job of cfg's plan, each in a child process, writing a
// progress line per job to progress (which may be nil), and returns the
// report. The binary must call RunChildIfRequested at start. A job that
// fails becomes a row with Err set; Run fails only if it cannot start.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp(cfg.TempDir, "mqbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	jobs := cfg.Plan()
	rep := &Report{Meta: newMeta(cfg)}
	pr := newProgress(progress, len(jobs))
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		pr.begin(j)
		var r Result
		t := time.Now()
		switch j.Kind {
		case KindRecovery:
			r = runRecoveryJob(ctx, base, j)
		case KindConsume:
			r = runConsumeJob(ctx, base, j)
		default:
			r = runChild(ctx, base, j)
		}
		r.WallSeconds = time.Since(t).Seconds()
		pr.end(r)
		rep.add(r)
	}
	rep.Meta.Elapsed = time.Since(pr.start).Round(time.Millisecond)
	return rep, nil
}

func newMeta(cfg Config) Meta {
	m := Meta{Preset: "full", Started: time.Now(), GoVersion: runtime.Version(), OS: runtime.GOOS,
		Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if cfg.Quick {
		m.Preset = "quick"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// progressLine prints one line per job; on a terminal the running job's
// line is shown until it ends.
type progressLine struct {
	w     io.Writer
	tty   bool
	total int
	n     int
	start time.Time
}

func newProgress(w io.Writer, total int) *progressLine {
	p := &progressLine{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progressLine) prefix(j Job) string {
	name := j.Workload()
	if j.System != "" && j.Kind != KindRecovery {
		name += "  " + j.SystemLabel()
	}
	return fmt.Sprintf("[%*d/%d %4.0fs] %-34s", len(fmt.Sprint(p.total)), p.n, p.total,
		time.Since(p.start).Seconds(), name)
}

func (p *progressLine) begin(j Job) {
	p.n++
	if p.w != nil && p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s running", p.prefix(j))
	}
}

func (p *progressLine) end(r Result) {
	if p.w == nil {
		return
	}
	var s string
	switch {
	case r.Err != "":
		s = "ERROR " + r.Err
	case r.Job.Kind == KindLimits:
		s = fmt.Sprintf("%d probes", len(r.Limits))
	case r.Recovery != nil:
		s = fmt.Sprintf("open %s, first read %s, lookup p50 %s", fmtDur(r.Recovery.Open),
			fmtDur(r.Recovery.FirstRead), fmtDur(r.Recovery.LookupP50))
	case r.Job.Kind == KindLatency:
		s = fmt.Sprintf("p50 %s p99 %s", fmtDur(r.P50), fmtDur(r.P99))
	default:
		s = fmt.Sprintf("%s msgs/s %s MB/s", fmtRate(r.MsgsPerSec()), fmtMB(r.MBPerSec()))
	}
	cr := ""
	if p.tty {
		cr = "\r\033[K"
	}
	fmt.Fprintf(p.w, "%s%s %s (%.2fs)\n", cr, p.prefix(r.Job), s, r.WallSeconds)
}
