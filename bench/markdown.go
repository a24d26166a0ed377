package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the whole report: run details, the machine's
// limits, throughput, latency, the crash test, failures and how to read
// the columns. chart names the SVG to link ("" for none).
func (rep *Report) WriteMarkdown(w io.Writer, chart string) error {
	var b strings.Builder
	m := rep.Meta
	fmt.Fprintf(&b, "# mqbench results (%s run)\n\n", m.Preset)
	fmt.Fprintf(&b, "%s, %s %s/%s, %d CPUs, kernel %s; the run took %s. Every row ran in its own child process.\n\n",
		m.Started.Format("2006-01-02 15:04 MST"), m.GoVersion, m.OS, m.Arch, m.CPUs, m.Kernel, m.Elapsed)
	if chart != "" {
		fmt.Fprintf(&b, "![throughput per system and workload](%s)\n\n", chart)
	}
	section := func(title, intro string, t *Table) {
		if len(t.Rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "## %s\n\n", title)
		if intro != "" {
			b.WriteString(intro + "\n\n")
		}
		t.Write(&b)
		b.WriteString("\n")
	}
	section("Machine limits (same run)", "What the hardware allows here: the ceilings the rows below are measured against.",
		rep.LimitsTable())
	section("Throughput", throughputIntro, rep.ThroughputTable())
	section("End-to-end latency at a steady rate", latencyIntro, rep.LatencyTable())
	section("mqlite crash recovery and key lookup", recoveryIntro, rep.RecoveryTable())
	if failed := rep.Failed(); len(failed) > 0 {
		b.WriteString("## Failures\n\n")
		for _, r := range failed {
			fmt.Fprintf(&b, "- %s %s: %s\n", r.Job.Workload(), r.Job.SystemLabel(), r.Err)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

const throughputIntro = `Producers send bodies of random bytes; *msgs/s* and *MB/s* (bodies only, 10^6 B) count from the first send to the last ack (close is not timed).
*vs mqlite* is the row's msgs/s over mqlite's in the same workload (above 1: faster than mqlite).
*p50/p99* are per send call: one message, or one batch of 1000 in *batch* rows (JetStream *async*: publish to ack, acks collected in order).
A row that reached its time cap before its count says so in *msgs*.
*consume* writes a backlog (batches of 1000, async, untimed) in one child process, which closes the store and exits; a new child reopens it and times one consumer reading it all (so that no reader starts with memory its own writes warmed).
mqlite has three consume rows: its push consumer (default options: 20 handler goroutines, one message per handler call, the handler counts) and its pull consumer (default options, Poll of 32), both starting at the first offset, their backlog written as a default Producer writes one (each batch to the next of the topic's 16 queues), and the raw *readqueue* (ReadQueue of up to 1,024); *vs mqlite* is against the push row. *mqlite decode-floor* is a probe, not a reader: one goroutine decodes the backlog's raw records (its first 8 MiB, copied out untimed and cycled) into one new MessageExt each as the store hands them out, with no store call and no consumer: the least any mqlite consume row can cost. *mqlite decode-floor-parallel* is the same probe on GOMAXPROCS goroutines, each decoding its share: with no processor idle, the collector no longer runs on a spare one.
*GCs* counts the garbage collections the child completed in the timed part (every system is a Go library in that process): the collector's fixed cost per cycle (two stop-the-world pauses, stacks, sweeping) makes it a large part of a reader's CPU when each message allocates a few hundred bytes.
*peak RSS* is the child's VmHWM, which counts touched pages of mapped files (mqlite's CommitLog, bbolt's file); *peak anon* is the highest RssAnon sampled every 20 ms.
In *sync* rows of a system that counts its syncs (mqlite: CommitLog flushes in Stats), the durability column adds the messages per sync: how many acknowledged sends each group commit covered.`

const latencyIntro = `One producer sends at a fixed rate, each body stamped with the time its send call began; one consumer in the same process records the time until it receives the message.
mqlite's consumer is ReadQueue (woken by the dispatcher), JetStream's an ordered consumer; bbolt, wal and Pebble have no wait of their own, so their consumer is woken by the producer after each commit (what a program using them as a queue builds).
With FlushSync, mqlite's readers see only flushed messages, so its *sync* row includes the fsync. Pebble shows a batch to readers before its WAL sync ends (in a counted run 4,746 of 5,000 messages were read before their Set returned), so its *sync* row does not: *mqlite read-uncommitted* (Options.ReadUncommitted: the send still returns after its sync, a reader sees the record once written) is the row to compare with it.
*sent/s* below the target rate means the producer's send calls (which block in *sync* rows) took longer than the interval; latency is measured from each actual send.`

const recoveryIntro = `A child process puts 1 KiB messages, each with one key, with FlushAsync until the CommitLog holds the target size, then is killed with SIGKILL while still writing.
The page cache survives (a process crash, not a power loss). *Open* is mqlite.Open on the killed store; *first read* the first ReadQueue after it; *lookups* are MessagesByKey for random keys among those written.`
