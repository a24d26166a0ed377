//go:build linux

package mqlite

// Helpers for the tests that re-run the test binary as a child process
// (kill -9, resource limits, another user, a mount namespace): the parent
// starts a helper test by name, reads the lines it prints, and kills it or
// waits for it. scenario_crash_test.go has its own, older, harness.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Environment of a child process.
const (
	childEnv    = "MQLITE_CHILD"     // name of the helper test to run
	childDirEnv = "MQLITE_CHILD_DIR" // its store directory
)

// child is a running helper process.
type child struct {
	t      testing.TB
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
	killed bool
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild runs the helper test name with the store directory dir. attr
// may set credentials or namespaces; the child is always killed if the
// parent dies. The error is Start's (a namespace the kernel refuses).
func startChild(t testing.TB, name, dir string, attr *syscall.SysProcAttr, env ...string) (*child, error) {
	t.Helper()
	return startChildArgs(t, name, dir, attr, nil, env...)
}

// startChildArgs is startChild with extra test flags for the child (a
// -test.cpuprofile, say).
func startChildArgs(t testing.TB, name, dir string, attr *syscall.SysProcAttr, args []string, env ...string) (*child, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^" + name + "$", "-test.count=1", "-test.timeout=3m"}, args...)...)
	cmd.Env = append(append(os.Environ(), childEnv+"="+name, childDirEnv+"="+dir), env...)
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = attr
	c := &child{t: t, cmd: cmd, lines: make(chan string, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { // ends at EOF: when the child exits
		defer close(c.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a partial last line is dropped
			}
			c.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.kill()
		}
	})
	return c, nil
}

// expect returns the fields after word of the next line that starts with
// it. A "fail ..." line fails the test, a "skip ..." line skips it, and
// the child's exit before such a line fails it.
func (c *child) expect(word string) []string {
	c.t.Helper()
	for line := range c.lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case word:
			return f[1:]
		case "fail":
			c.t.Fatalf("child: %s\n%s", line, c.stderr.String())
		case "skip":
			c.kill()
			c.t.Skip("child: " + strings.TrimPrefix(line, "skip "))
		}
	}
	err := c.cmd.Wait()
	c.t.Fatalf("the child exited (%v) before printing %q\n%s", err, word, c.stderr.String())
	return nil
}

// kill sends SIGKILL and waits; it returns the lines printed meanwhile.
func (c *child) kill() []string {
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Errorf("kill: %v", err)
	}
	c.killed = true
	return c.wait()
}

// wait waits for the child to exit and returns the lines it printed that
// were not read yet. An exit other than success (or the SIGKILL sent by
// kill) fails the test.
func (c *child) wait() []string {
	var rest []string
	for line := range c.lines {
		rest = append(rest, line)
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case c.killed && errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
	default:
		c.t.Errorf("child: %v\n%s", err, c.stderr.String())
	}
	return rest
}

// childDir returns the store directory of the helper test name, which
// skips unless it runs as that child.
func childDir(t *testing.T, name string) string {
	if os.Getenv(childEnv) != name {
		t.Skip("helper process")
	}
	return os.Getenv(childDirEnv)
}

var emitMu sync.Mutex

// emit prints one line for the parent (one write: atomic on a pipe).
func emit(format string, args ...any) {
	line := fmt.Sprintf(format+"\n", args...)
	emitMu.Lock()
	os.Stdout.WriteString(line)
	emitMu.Unlock()
}

// childFail reports a failure to the parent and ends the child's test.
func childFail(t *testing.T, format string, args ...any) {
	emit("fail "+format, args...)
	t.FailNow()
}

// mappingsUnder counts this process's mappings of files under dir.
func mappingsUnder(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), dir+"/")
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // the directory being read
}
