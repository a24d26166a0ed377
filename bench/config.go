package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SizeCount is a body size and the number of messages sent at that size.
type SizeCount struct {
	Size  int
	Count int
}

// LatencySpec is one latency workload.
type LatencySpec struct {
	Mode     Mode // Async or Sync
	Size     int
	Rate     int // messages per second
	Duration time.Duration
}

// Config says what a run does. QuickConfig and FullConfig are the two
// presets; a zero field disables that part.
type Config struct {
	Quick     bool     // informational: which preset
	Systems   []string // systems to run, in order; empty means all
	Workloads []string // filters (see Match); empty means all

	Sizes     []SizeCount // produce and consume
	Producers []int       // producer goroutines per produce row
	Modes     []Mode      // produce modes
	Batch     int         // messages per call in Batch mode and for backlogs
	RowLimit  time.Duration
	Latency   []LatencySpec

	SegmentSize   int64 // mqlite CommitLog segment size; 0 = 1 GiB (benchSegmentSize)
	RecoveryBytes int64 // CommitLog written before the kill; 0 skips recovery
	Lookups       int

	ProbeBytes int64 // limits: mapped file size; 0 skips the limits
	WriteBytes int64
	FsyncOps   int

	TempDir string // parent of the working directories; "" = os.TempDir()
}

// FullConfig is the full run: the counts, sync rows capped at
// 10 s each (at ~2K msgs/s a million synced messages would take ~8 min
// per row).
func FullConfig() Config {
	return Config{
		Sizes:     []SizeCount{{128, 1_000_000}, {4096, 200_000}},
		Producers: []int{1, 16},
		Modes:     []Mode{Async, Batch, Sync},
		Batch:     1000,
		RowLimit:  10 * time.Second,
		Latency: []LatencySpec{{Async, 128, 10_000, 5 * time.Second},
			{Sync, 128, 1_000, 5 * time.Second}},
		RecoveryBytes: 1 << 30,
		Lookups:       1000,
		ProbeBytes:    256 << 20,
		WriteBytes:    1 << 30,
		FsyncOps:      1000,
	}
}

// QuickConfig is the CI run: every row, small counts, 64 MiB mqlite
// segments; well under a minute on two cores.
func QuickConfig() Config {
	return Config{
		Quick:     true,
		Sizes:     []SizeCount{{128, 100_000}, {4096, 10_000}},
		Producers: []int{1, 16},
		Modes:     []Mode{Async, Batch, Sync},
		Batch:     1000,
		RowLimit:  400 * time.Millisecond,
		Latency: []LatencySpec{{Async, 128, 2_000, 500 * time.Millisecond},
			{Sync, 128, 500, 500 * time.Millisecond}},
		SegmentSize:   64 << 20,
		RecoveryBytes: 32 << 20,
		Lookups:       200,
		ProbeBytes:    32 << 20,
		WriteBytes:    64 << 20,
		FsyncOps:      100,
	}
}

// Match reports whether the job passes the workload filters: a filter
// matches a kind ("produce"), a kind and mode ("produce/sync"), or a
// size ("produce/4KiB"), or a reader of a consume row ("consume/pull").
func (c *Config) Match(j Job) bool {
	if len(c.Workloads) == 0 {
		return true
	}
	for _, w := range c.Workloads {
		kind, rest, _ := strings.Cut(w, "/")
		if Kind(kind) != j.Kind {
			continue
		}
		if rest == "" || Mode(rest) == j.Mode || rest == sizeName(j.Size) || (j.Reader != "" && rest == j.Reader) {
			return true
		}
	}
	return false
}

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var problems []string
	if err := validSystems(c.Systems); err != nil {
		problems = append(problems, err.Error())
	}
	kinds := []Kind{KindLimits, KindProduce, KindConsume, KindLatency, KindRecovery}
	for _, w := range c.Workloads {
		kind, _, _ := strings.Cut(w, "/")
		if !slices.Contains(kinds, Kind(kind)) {
			problems = append(problems, fmt.Sprintf("unknown workload %q (kinds %v)", w, kinds))
		}
	}
	for _, m := range c.Modes {
		if m != Async && m != Batch && m != Sync {
			problems = append(problems, fmt.Sprintf("unknown mode %q", m))
		}
	}
	for _, p := range c.Producers {
		if p < 1 {
			problems = append(problems, fmt.Sprintf("producers %d < 1", p))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("bench: bad config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Plan lists the jobs of a run in order: limits, then each workload for
// every system in turn (so systems compared in one row run close in
// time), then the mqlite crash test.
func (c *Config) Plan() []Job {
	systems := c.Systems
	if len(systems) == 0 {
		systems = SystemNames()
	}
	var jobs []Job
	add := func(j Job) {
		if c.Match(j) {
			jobs = append(jobs, j)
		}
	}
	if c.ProbeBytes > 0 {
		add(Job{Kind: KindLimits, ProbeBytes: c.ProbeBytes, WriteBytes: c.WriteBytes, FsyncOps: c.FsyncOps})
	}
	each := func(j Job) {
		for _, s := range systems {
			j.System = s
			if s == "mqlite" {
				j.SegmentSize = c.SegmentSize
			} else {
				j.SegmentSize = 0
			}
			var readers []string
			switch {
			case j.Kind == KindConsume:
				readers = Readers(s)
			case j.Kind == KindLatency && j.Mode == Sync && s == "mqlite":
				readers = []string{"", ReaderUncommitted}
			}
			if len(readers) == 0 {
				add(j)
				continue
			}
			for _, r := range readers {
				j.Reader = r
				add(j)
			}
			j.Reader = ""
		}
	}
	for _, sc := range c.Sizes {
		for _, m := range c.Modes {
			for _, p := range c.Producers {
				batch := 1
				if m == Batch {
					batch = c.Batch
				}
				each(Job{Kind: KindProduce, Mode: m, Size: sc.Size, Count: sc.Count, Producers: p,
					Batch: batch, Limit: c.RowLimit})
			}
		}
	}
	for _, sc := range c.Sizes {
		each(Job{Kind: KindConsume, Mode: Async, Size: sc.Size, Count: sc.Count, Producers: 1, Batch: c.Batch})
	}
	for _, l := range c.Latency {
		each(Job{Kind: KindLatency, Mode: l.Mode, Size: l.Size, Rate: l.Rate, Limit: l.Duration, Producers: 1, Batch: 1})
	}
	if c.RecoveryBytes > 0 && (len(c.Systems) == 0 || slices.Contains(c.Systems, "mqlite")) {
		add(Job{Kind: KindRecovery, System: "mqlite", RecoveryBytes: c.RecoveryBytes, Lookups: c.Lookups,
			SegmentSize: c.SegmentSize, Producers: 1, Batch: 1})
	}
	return jobs
}
