package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/mqlite/mqlite"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
	}
	if spec := os.Getenv(memberEnv); spec != "" {
		runMember(spec)
	}
	if addr := os.Getenv(tlsClientEnv); addr != "" {
		runTLSClient(addr)
	}
	rlog.SetLogLevel("fatal")
	code := m.Run()
	if code == 0 {
		if leaked := brokerGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of the broker left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// brokerGoroutines returns the stacks of goroutines running broker code,
// waiting up to d for them to end (connections close asynchronously).
func brokerGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if inBrokerCode(g) && !strings.Contains(g, "TestMain") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond) // bounded wait for asynchronous connection teardown
	}
}

// brokerFrame matches a stack frame in the broker's files.
var brokerFrame = regexp.MustCompile(`/broker/(remoting/)?[a-z0-9_]+\.go:\d+`)

// inBrokerCode reports whether a goroutine's stack runs through the
// broker's own code (not through test helpers a client calls back).
func inBrokerCode(stack string) bool {
	for _, f := range brokerFrame.FindAllString(stack, -1) {
		if !strings.Contains(f, "_test.go") {
			return true
		}
	}
	return false
}

var groupSeq atomic.Int64

// uniq returns a name unique in this test binary (client instances and
// groups are process-wide in the client library).
func uniq(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), groupSeq.Add(1))
}

type fixture struct {
	t     testing.TB
	store *mqlite.Store
	b     *Broker
	dir   string
	so    *mqlite.Options
	bo    Options
	// nsAddr, when set, is the name server of a broker in another process.
	nsAddr primitive.NamesrvAddr
}

func startBroker(t testing.TB, so *mqlite.Options, bo *Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	if so == nil {
		so = &mqlite.Options{}
	}
	st, err := mqlite.Open(dir, so)
	if err != nil {
		t.Fatal(err)
	}
	if bo == nil {
		bo = &Options{}
	}
	o := *bo
	if os.Getenv("MQBROKER_DEBUG") != "" && o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	b, err := Listen(st, &o)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	f := &fixture{t: t, store: st, b: b, dir: dir, so: so, bo: o}
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.b.Shutdown(ctx); err != nil && err != ErrClosed {
		f.t.Errorf("shutdown: %v", err)
	}
	if err := f.store.Close(); err != nil && !errors.Is(err, mqlite.ErrClosed) {
		f.t.Errorf("store close: %v", err)
	}
}

// restart stops the broker and the store and opens both again on the
// same directory and address.
func (f *fixture) restart() {
	f.t.Helper()
	f.stop()
	st, err := mqlite.Open(f.dir, f.so)
	if err != nil {
		f.t.Fatal(err)
	}
	o := f.bo
	o.Addr = f.b.Addr()
	b, err := Listen(st, &o)
	if err != nil {
		st.Close()
		f.t.Fatal(err)
	}
	f.store, f.b = st, b
}

func (f *fixture) ns() primitive.NamesrvAddr {
	if f.nsAddr != nil {
		return f.nsAddr
	}
	return primitive.NamesrvAddr{f.b.Addr()}
}

// eventually polls cond until it holds or d passes: for waiting on the
// client library's own timers (rebalance, heartbeats), which offer no hook.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopClient shuts a client down at the end of a test, except under the
// race detector: rocketmq-client-go's Shutdown sets rmqClient.close
// without synchronisation while the client's own goroutines read it
// (internal/client.go), a race the detector reports whatever the broker
// does. Under -race the client is left running until the process exits
// (it only retries against a broker that is gone); test brokers listen on
// fresh ports, so it reaches no later test.
func stopClient(shutdown func() error) {
	if !raceEnabled {
		shutdown()
	}
}
