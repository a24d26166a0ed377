package bench

import (
	"fmt"
	"time"
)

// Kind is what a job measures.
type Kind string

// The job kinds, in the order a run does them.
const (
	KindLimits   Kind = "limits"   // the machine's limits (no system)
	KindProduce  Kind = "produce"  // send Count messages (or until the row's time cap)
	KindConsume  Kind = "consume"  // read a backlog of Count messages after a reopen
	KindLatency  Kind = "latency"  // end-to-end latency at a steady rate
	KindRecovery Kind = "recovery" // mqlite only: reopen after SIGKILL, then key lookups

	kindRecoveryWrite Kind = "recovery-write" // the child that is killed
	kindConsumeWrite  Kind = "consume-write"  // the child that writes a consume row's backlog
)

// Mode is how producers send: durability and messages per call.
type Mode string

// The produce modes.
const (
	// Async sends one message per call; the ack comes before the data is
	// synced (each system's "no fsync" or periodic-fsync setting).
	Async Mode = "async"
	// Batch sends Config.Batch messages per call, with async durability.
	Batch Mode = "batch"
	// Sync sends one message per call; the ack comes after an fsync that
	// covers it (shared by concurrent producers where the system can).
	Sync Mode = "sync"
)

// Job is one unit of work, run in its own child process.
type Job struct {
	Kind      Kind
	System    string        `json:",omitempty"`
	Mode      Mode          `json:",omitempty"`
	Size      int           `json:",omitempty"` // body bytes
	Count     int           `json:",omitempty"` // messages
	Producers int           `json:",omitempty"`
	Batch     int           `json:",omitempty"` // messages per send call
	Rate      int           `json:",omitempty"` // latency: messages per second
	Limit     time.Duration `json:",omitempty"` // produce: time cap; latency: duration
	// SegmentSize is mqlite's CommitLog segment size (0: 1 GiB, benchSegmentSize).
	SegmentSize int64 `json:",omitempty"`
	// Reader is the consumer a consume row reads with (Params.Reader).
	Reader string `json:",omitempty"`

	RecoveryBytes int64 `json:",omitempty"` // CommitLog bytes written before the kill
	Lookups       int   `json:",omitempty"` // key lookups after recovery
	ProbeBytes    int64 `json:",omitempty"` // limits: mapped file size
	WriteBytes    int64 `json:",omitempty"` // limits: sequential write total
	FsyncOps      int   `json:",omitempty"` // limits: fsyncs per latency probe

	Dir string `json:",omitempty"` // working directory, set by the runner
}

// Workload names the job's workload, the same for every system (the key
// of the ratio column).
func (j Job) Workload() string {
	switch j.Kind {
	case KindProduce:
		s := fmt.Sprintf("produce %s p%d %s", sizeName(j.Size), j.Producers, j.Mode)
		if j.Mode == Batch {
			s += fmt.Sprintf("/%d", j.Batch)
		}
		return s
	case KindConsume:
		return fmt.Sprintf("consume %s", sizeName(j.Size))
	case KindLatency:
		return fmt.Sprintf("latency %s %s @%d/s", sizeName(j.Size), j.Mode, j.Rate)
	}
	return string(j.Kind)
}

// Params are the Params the job opens its system with.
func (j Job) Params() Params {
	return Params{Dir: j.Dir, Sync: j.Mode == Sync, Producers: max(j.Producers, 1), Batch: max(j.Batch, 1),
		SegmentSize: j.SegmentSize, Reader: j.Reader}
}

// SystemLabel is the system column of the job's row: the system, and the
// reader of a consume row where the system has several ("mqlite push").
func (j Job) SystemLabel() string {
	if j.Reader != "" {
		return j.System + " " + j.Reader
	}
	return j.System
}

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// Result is what one job measured.
type Result struct {
	Job        Job
	Durability string  `json:",omitempty"`
	Msgs       int64   `json:",omitempty"` // messages sent or received
	Bytes      int64   `json:",omitempty"` // body bytes
	Seconds    float64 `json:",omitempty"` // timed part only
	// WallSeconds is the child's whole life: start, open, work, close.
	WallSeconds float64 `json:",omitempty"`

	// Latency: produce rows, per send call (Batch: per call of Batch
	// messages); latency rows, send call to delivery to the consumer.
	P50, P99, Max time.Duration `json:",omitempty"`

	// Syncs: produce rows of a SyncCounter, the syncs in the timed part.
	Syncs int64 `json:",omitempty"`
	// GCs: produce and consume rows, the garbage collections the child
	// process completed in the timed part (every system is a Go library
	// running in that process).
	GCs int64 `json:",omitempty"`

	PeakRSS  int64 `json:",omitempty"` // VmHWM of the child: includes mapped file pages
	PeakAnon int64 `json:",omitempty"` // highest RssAnon seen (sampled every 20 ms)

	Err      string          `json:",omitempty"`
	Limits   []Limit         `json:",omitempty"`
	Recovery *RecoveryResult `json:",omitempty"`
}

// MsgsPerSec is the throughput in messages per second (0 if not timed).
func (r *Result) MsgsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.Seconds
}

// MBPerSec is the body throughput in 10^6 bytes per second.
func (r *Result) MBPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Seconds / 1e6
}

// Execute runs j in this process and returns its result (Err set on
// failure). The runner calls it in a child process.
func Execute(j Job) Result {
	var r Result
	var err error
	switch j.Kind {
	case KindLimits:
		r, err = runLimits(j)
	case KindProduce, KindConsume, kindConsumeWrite, KindLatency:
		var sys System
		if sys, err = LookupSystem(j.System); err == nil {
			switch j.Kind {
			case KindProduce:
				r, err = runProduce(sys, j)
			case kindConsumeWrite:
				err = runConsumeWrite(sys, j)
			case KindConsume:
				r, err = runConsume(sys, j)
			default:
				r, err = runLatency(sys, j)
			}
		}
	case kindRecoveryWrite:
		err = runRecoveryWrite(j)
	case KindRecovery:
		r, err = runRecovery(j)
	default:
		err = fmt.Errorf("bench: unknown job kind %q", j.Kind)
	}
	r.Job = j
	r.Job.Dir = ""
	if err != nil {
		r.Err = err.Error()
	}
	return r
}
