package txn_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const configDir = "store/config"

// env is one store (fake), its config directory and the current service.
type env struct {
	t    testing.TB
	clk  *clock.Fake
	st   *fakeStore
	fs   *vfs.MemFS
	opts txn.ServiceOptions
	svc  *txn.Service
	logs *syncBuffer
}

func newEnv(t testing.TB, o txn.ServiceOptions) *env {
	t.Helper()
	clk := clock.NewFake(t0)
	e := &env{t: t, clk: clk, st: newFakeStore(clk), fs: vfs.NewMem(), logs: &syncBuffer{}}
	o.FS, o.Dir, o.Clock = e.fs, configDir, clk
	o.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	e.opts = o
	e.svc = e.newService()
	t.Cleanup(func() {
		if err := e.svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	return e
}

func (e *env) newService() *txn.Service {
	e.t.Helper()
	s, err := txn.NewService(e.st, e.opts)
	if err != nil {
		e.t.Fatalf("NewService: %v", err)
	}
	return s
}

// crashRestart abandons the current service as a crashed process would
// (it must not be started) and opens a new one over the same store and
// config directory.
func (e *env) crashRestart() {
	e.t.Helper()
	e.st.restart()
	e.svc = e.newService()
}

func (e *env) producer(group string, c txn.Checker) *txn.Producer {
	e.t.Helper()
	p, err := txn.NewProducer(e.svc, c, txn.ProducerOptions{Group: group})
	if err != nil {
		e.t.Fatalf("NewProducer: %v", err)
	}
	e.t.Cleanup(func() { p.Close() })
	return p
}

// checkNow advances the clock by d and runs a check round.
func (e *env) checkNow(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	if err := e.svc.CheckNow(context.Background()); err != nil {
		e.t.Fatalf("CheckNow: %v", err)
	}
}

// ops returns the op records as "tag:offset" strings.
func (e *env) ops() []string {
	var out []string
	for _, m := range e.st.messages(topic.OpHalf) {
		out = append(out, m.Tags+":"+string(m.Body))
	}
	return out
}

func countOps(ops []string, want string) int {
	n := 0
	for _, o := range ops {
		if o == want {
			n++
		}
	}
	return n
}

// uniqs counts the messages of topic by unique key.
func (e *env) uniqs(t string) map[string]int {
	out := map[string]int{}
	for _, m := range e.st.messages(t) {
		out[m.UniqKey]++
	}
	return out
}

func state(s txn.TxState) txn.LocalTx {
	return func(context.Context, *message.Message) txn.TxState { return s }
}

func checkerOf(s txn.TxState) txn.Checker {
	return func(context.Context, *message.MessageExt) txn.TxState { return s }
}

func msg(body string) *message.Message {
	return &message.Message{Topic: "orders", Tags: "created", Keys: []string{"k-" + body}, Body: []byte(body),
		Properties: map[string]string{"amount": strconv.Itoa(len(body))}}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
