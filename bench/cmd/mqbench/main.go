// Command mqbench runs the same workloads against mqlite, NATS JetStream
// (embedded), bbolt, tidwall/wal and Pebble, with the machine's limits
// measured in the same run, and writes a Markdown table, a JSON dump and
// an SVG chart.
//
//	go run ./cmd/mqbench -quick -out /tmp/benchq   # CI size, under a minute
//	go run ./cmd/mqbench -out results              # full size, 8-10 minutes
//
// Progress goes to stderr, the tables to stdout. See ../../README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/mqlite/mqlite/bench"
)

func main() {
	bench.RunChildIfRequested()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mqbench:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run() error {
	quick := flag.Bool("quick", false, "small counts for CI (under a minute, every system and workload)")
	out := flag.String("out", "", "directory for results.md, results.json and chart.svg (none if empty)")
	only := flag.String("only", "", "comma-separated systems: "+strings.Join(bench.SystemNames(), ","))
	workloads := flag.String("workloads", "", "comma-separated filters: limits, produce, consume, latency, recovery,\n"+
		"optionally with /mode, /size or a consume reader (produce/sync, consume/4KiB, consume/pull)")
	rowTime := flag.Duration("row-time", 0, "time cap per produce row (default 10s full, 400ms quick)")
	scale := flag.Float64("scale", 1, "multiply message counts and the recovery size")
	segment := flag.Int64("mqlite-segment", -1, "mqlite CommitLog segment size in bytes (default: mqlite's 1 GiB full, 64 MiB quick)")
	tmp := flag.String("dir", "", "parent of the working directories (default $TMPDIR)")
	flag.Parse()

	cfg := bench.FullConfig()
	if *quick {
		cfg = bench.QuickConfig()
	}
	cfg.Systems, cfg.Workloads, cfg.TempDir = split(*only), split(*workloads), *tmp
	if *rowTime > 0 {
		cfg.RowLimit = *rowTime
	}
	if *segment >= 0 {
		cfg.SegmentSize = *segment
	}
	if *scale != 1 {
		for i := range cfg.Sizes {
			cfg.Sizes[i].Count = max(int(float64(cfg.Sizes[i].Count)**scale), 1)
		}
		cfg.RecoveryBytes = int64(float64(cfg.RecoveryBytes) * *scale)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.Run(ctx, cfg, os.Stderr)
	if err != nil {
		return err
	}
	chart := ""
	if *out != "" {
		chart = "chart.svg"
	}
	if err := rep.WriteMarkdown(os.Stdout, chart); err != nil {
		return err
	}
	if *out != "" {
		if err := writeOut(*out, rep); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(*out, "{results.md,results.json,chart.svg}"))
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("%d of the jobs failed (see Failures)", len(failed))
	}
	return nil
}

func writeOut(dir string, rep *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	create := func(name string, write func(f *os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	title := fmt.Sprintf("mqbench throughput, %s run %s", rep.Meta.Preset, rep.Meta.Started.Format(time.DateOnly))
	return errorsJoin(
		create("results.md", func(f *os.File) error { return rep.WriteMarkdown(f, "chart.svg") }),
		create("chart.svg", func(f *os.File) error { return bench.WriteChart(f, rep.Rows, title) }),
		create("results.json", func(f *os.File) error {
			e := json.NewEncoder(f)
			e.SetIndent("", "  ")
			return e.Encode(rep)
		}),
	)
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
