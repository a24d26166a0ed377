package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The child protocol: the runner re-executes its own binary with the job
// as JSON in jobEnv and the path for the result in outEnv. A binary that
// runs jobs (cmd/mqbench, and test binaries through TestMain) calls
// RunChildIfRequested first thing.
const (
	jobEnv = "MQBENCH_JOB"
	outEnv = "MQBENCH_OUT"
)

// RunChildIfRequested runs the job this process was started for, writes
// its result and exits; it returns at once in a process that is not a
// benchmark child.
func RunChildIfRequested() {
	spec, ok := os.LookupEnv(jobEnv)
	if !ok {
		return
	}
	var j Job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintf(os.Stderr, "mqbench child: bad job: %v\n", err)
		os.Exit(2)
	}
	stop := sampleRSS()
	r := Execute(j)
	r.PeakRSS, r.PeakAnon = stop()
	b, err := json.Marshal(r)
	if err == nil {
		err = os.WriteFile(os.Getenv(outEnv), b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqbench child: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// procStatus reads one "Name: N kB" field of /proc/self/status, in bytes.
func procStatus(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sampleRSS samples RssAnon every 20 ms until the returned function is
// called; that returns VmHWM (the kernel's peak, mapped file pages
// included) and the highest RssAnon seen.
func sampleRSS() func() (hwm, anon int64) {
	var peak atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if a := procStatus("RssAnon"); a > peak.Load() {
				peak.Store(a)
			}
			select {
			case <-t.C:
			case <-quit:
				return
			}
		}
	}()
	return func() (int64, int64) {
		close(quit)
		<-done
		return procStatus("VmHWM"), max(peak.Load(), procStatus("RssAnon"))
	}
}

// tailBuffer keeps the last bytes written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf); n > 2048 {
		t.buf = append(t.buf[:0], t.buf[n-2048:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// childCmd prepares a child process for j, its result going to out.
func childCmd(ctx context.Context, j Job, out string, stderr *tailBuffer) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), jobEnv+"="+string(spec), outEnv+"="+out)
	cmd.Stderr = stderr
	return cmd, nil
}

// runChild runs j in a child process in a fresh directory under base and
// returns its result; a child that fails to report becomes an error row.
func runChild(ctx context.Context, base string, j Job) Result {
	dir, err := newJobDir(base, "job-", &j)
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	defer os.RemoveAll(dir)
	return runChildIn(ctx, filepath.Join(dir, "result.json"), j)
}

// newJobDir makes a fresh directory under base for a job and its data
// directory in it, which it sets as j.Dir. The caller removes dir.
func newJobDir(base, prefix string, j *Job) (dir string, err error) {
	if dir, err = os.MkdirTemp(base, prefix); err != nil {
		return "", err
	}
	j.Dir = filepath.Join(dir, "data")
	if err := os.Mkdir(j.Dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// runChildIn runs j in a child process that writes its result to out.
func runChildIn(ctx context.Context, out string, j Job) Result {
	var stderr tailBuffer
	cmd, err := childCmd(ctx, j, out, &stderr)
	if err == nil {
		err = cmd.Run()
	}
	return readResult(j, out, cmd, err, &stderr)
}

func readResult(j Job, out string, cmd *exec.Cmd, runErr error, stderr *tailBuffer) Result {
	j.Dir = ""
	var r Result
	b, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if runErr != nil || err != nil {
		msg := fmt.Sprintf("child: %v", runErr)
		if runErr == nil {
			msg = fmt.Sprintf("child result: %v", err)
		}
		if s := stderr.String(); s != "" {
			msg += ": " + s
		}
		return Result{Job: j, Err: msg}
	}
	if cmd != nil && cmd.ProcessState != nil && r.PeakRSS == 0 {
		r.PeakRSS = maxRSS(cmd.ProcessState)
	}
	return r
}

// runConsumeJob runs a consume row in two children in one directory: the
// first writes the backlog and exits, the second opens it and reads it.
// A reader in the writer's process would start with the heap the writes
// left behind: a system that writes through the Go heap would read with
// memory the kernel has already handed out, one that writes through a
// mapping would not.
func runConsumeJob(ctx context.Context, base string, j Job) Result {
	dir, err := newJobDir(base, "consume-", &j)
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	defer os.RemoveAll(dir)
	w := j
	w.Kind = kindConsumeWrite
	if r := runChildIn(ctx, filepath.Join(dir, "writer.json"), w); r.Err != "" {
		return Result{Job: j, Err: "backlog writer: " + r.Err}
	}
	return runChildIn(ctx, filepath.Join(dir, "result.json"), j)
}

// runRecoveryJob runs the crash test: a writer child killed with SIGKILL
// once it reports j.RecoveryBytes written, then a child that recovers.
func runRecoveryJob(ctx context.Context, base string, j Job) Result {
	dir, err := newJobDir(base, "recovery-", &j)
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	defer os.RemoveAll(dir)
	w := j
	w.Kind = kindRecoveryWrite
	var stderr tailBuffer
	cmd, err := childCmd(ctx, w, filepath.Join(dir, "writer.json"), &stderr)
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return Result{Job: j, Err: err.Error()}
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	cmd.Process.Kill() // SIGKILL, mid-write
	waitErr := cmd.Wait()
	if !strings.HasPrefix(line, recoveryReady) {
		return Result{Job: j, Err: fmt.Sprintf("recovery writer: %v: %s", waitErr, stderr.String())}
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		return Result{Job: j, Err: fmt.Sprintf("recovery writer ended before the kill: %v", waitErr)}
	}
	return runChildIn(ctx, filepath.Join(dir, "result.json"), j)
}
