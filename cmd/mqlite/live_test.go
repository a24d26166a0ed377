//go:build linux

package main

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
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
)

const liveEnv = "MQLITE_TOOL_LIVE_DIR" // set in the writer child

var liveOpts = mqlite.Options{SegmentSize: 32 << 10, ConsumeQueueEntries: 256, IndexSlots: 256, IndexEntries: 1024}

// TestChildToolWriter is the child of TestToolBesideWritingProcess: it
// writes until killed, printing "visible n" every 50 messages once they
// are visible.
func TestChildToolWriter(t *testing.T) {
	dir := os.Getenv(liveEnv)
	if dir == "" {
		t.Skip("helper process")
	}
	s, err := mqlite.Open(dir, &liveOpts)
	if err != nil {
		fmt.Printf("fail %v\n", err)
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 1; i <= 1_000_000; i++ { // killed long before
		if _, err := s.Put(ctx, &mqlite.Message{Topic: "live", Keys: []string{"k" + strconv.Itoa(i)}, Body: []byte(strings.Repeat("x", 1+i%500))}, i%2); err != nil {
			fmt.Printf("fail %v\n", err)
			t.Fatal(err)
		}
		if i%50 == 0 {
			if err := s.WaitVisible(ctx); err != nil {
				t.Fatal(err)
			}
			os.Stdout.WriteString("visible " + strconv.Itoa(i) + "\n")
		}
	}
}

// The tool beside a process that keeps writing: it opens the store
// read-only by itself (saying so), verifies it clean, sees at least what
// the writer had made visible, and refuses rebuild-index.
func TestToolBesideWritingProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildToolWriter$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), liveEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	visible := 0
	waitVisible := func(n int) {
		for visible < n {
			require.True(t, lines.Scan(), "the writer exited: %v", lines.Err())
			f := strings.Fields(lines.Text())
			require.Equal(t, "visible", f[0], lines.Text())
			visible, err = strconv.Atoi(f[1])
			require.NoError(t, err)
		}
	}
	f := &fixture{dir: dir}
	for round := range 3 {
		waitVisible(300 * (round + 1))
		seen := visible
		var rep verifyResult
		out, errOut, code := f.run(t, "-json", "verify")
		require.Equal(t, 0, code, "round %d: %s\n%s", round, out, errOut)
		require.Contains(t, errOut, "is in use by another process; reading it read-only")
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.True(t, rep.OK, "%v", rep.Problems)
		require.GreaterOrEqual(t, rep.Records, int64(seen))

		var topics []topicRow
		out, _, code = f.run(t, "-json", "topics")
		require.Equal(t, 0, code)
		require.NoError(t, json.Unmarshal([]byte(out), &topics))
		for _, r := range topics {
			if r.Name == "live" {
				require.GreaterOrEqual(t, r.Messages, int64(seen), "round %d", round)
			}
		}
		out, _, code = f.run(t, "query", "-topic", "live", "-key", "k"+strconv.Itoa(seen-1))
		require.Equal(t, 0, code, "a message made visible before the tool ran is found by key")
		require.Contains(t, out, " k"+strconv.Itoa(seen-1)+" ")
	}
	_, errOut, code := f.run(t, "rebuild-index")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "in use by another process")
}
