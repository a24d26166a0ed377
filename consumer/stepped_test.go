package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// newSteppedEnv is newEnv with a stepped Manager on a fake clock.
func newSteppedEnv(t *testing.T) (*env, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := &env{t: t, st: newFakeStore(clk), fs: newMemFS(), clk: clk}
	mg, err := NewManager(e.st, ManagerOptions{FS: e.fs, Dir: cfgDir, Clock: clk, Stepped: true})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	e.mg = mg
	t.Cleanup(func() {
		if err := e.mg.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
		e.st.close()
	})
	return e, clk
}

// recorder is a handler that records "name topic:queue@offset rc" per
// message and fails while fail says so.
type recorder struct {
	mu   sync.Mutex
	got  []string
	fail func(m *message.MessageExt) bool
}

func (r *recorder) handler(name string) Handler {
	return func(_ context.Context, ms []*message.MessageExt) ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		res := ConsumeSuccess
		for _, m := range ms {
			r.got = append(r.got, fmt.Sprintf("%s %s:%d@%d rc=%d", name, m.Topic, m.QueueID, m.QueueOffset, m.ReconsumeTimes))
			if r.fail != nil && r.fail(m) {
				res = ReconsumeLater
			}
		}
		return res
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func step(t *testing.T, mg *Manager) {
	t.Helper()
	if err := mg.Step(context.Background()); err != nil {
		t.Fatalf("Step: %v", err)
	}
}

// TestStepNeedsStepped: Step on a Manager without Stepped is
// ErrInvalidArgument and changes nothing.
func TestStepNeedsStepped(t *testing.T) {
	e := newEnv(t, nil)
	err := e.mg.Step(context.Background())
	isErr(t, err, ErrInvalidArgument, "Step without Stepped")
}

// TestStepOrderAndHandOver: nothing is fetched or handled between Steps;
// a Step hands queues over between two members (the first releases them,
// the second takes them in the same Step) and delivers every message
// once, member by member in creation order, queue by queue, in offset
// order, however many goroutines the members were given.
func TestStepOrderAndHandOver(t *testing.T) {
	e, _ := newSteppedEnv(t)
	e.st.createTopic("t", 4)
	var r recorder
	a := e.push("g", Options{Goroutines: 8, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", r.handler("a"))
	defer a.Close()
	b := e.push("g", Options{Goroutines: 8, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", r.handler("b"))
	defer b.Close()
	for i := range 8 {
		e.st.put("t", i%4, "", fmt.Sprint(i))
	}
	if got := r.take(); len(got) != 0 {
		t.Fatalf("handled before Step: %v", got)
	}
	if n := e.st.pulls.Load(); n != 0 {
		t.Fatalf("%d pulls before Step", n)
	}
	step(t, e.mg)
	want := []string{
		"a t:0@0 rc=0", "a t:0@1 rc=0", "a t:1@0 rc=0", "a t:1@1 rc=0",
		"b t:2@0 rc=0", "b t:2@1 rc=0", "b t:3@0 rc=0", "b t:3@1 rc=0",
	}
	if got := r.take(); !slices.Equal(got, want) {
		t.Fatalf("deliveries:\n got %v\nwant %v", got, want)
	}
	step(t, e.mg)
	if got := r.take(); len(got) != 0 {
		t.Fatalf("a second Step delivered again: %v", got)
	}
	if c := e.committed("g", "", "t", 3); c != 2 {
		t.Fatalf("committed offset of t:3 = %d, want 2", c)
	}
}

// TestStepSendBackAndOrderlySuspend: a failed concurrent batch is sent
// back within the Step that ran it; a failed orderly batch suspends its
// queue until SuspendInterval has passed on the clock, and a Step before
// then does not call the handler.
func TestStepSendBackAndOrderlySuspend(t *testing.T) {
	e, clk := newSteppedEnv(t)
	e.st.createTopic("c", 1)
	e.st.createTopic("o", 1)
	fails := &recorder{fail: func(m *message.MessageExt) bool { return m.ReconsumeTimes == 0 }}
	c := e.push("gc", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "c", fails.handler("c"))
	defer c.Close()
	orderly := &recorder{fail: func(*message.MessageExt) bool { return true }}
	o := e.push("go", Options{Orderly: true, SuspendInterval: time.Second, MaxReconsumeTimes: 5,
		ConsumeFromWhere: ConsumeFromFirstOffset}, "o", orderly.handler("o"))
	defer o.Close()
	e.st.put("c", 0, "", "x")
	e.st.put("o", 0, "", "y")
	step(t, e.mg)
	if got := fails.take(); !slices.Equal(got, []string{"c c:0@0 rc=0"}) {
		t.Fatalf("concurrent deliveries: %v", got)
	}
	if sb := e.st.sentBack(); len(sb) != 1 || sb[0].QueueOffset != 0 {
		t.Fatalf("sent back after the Step: %d messages", len(sb))
	}
	if got := orderly.take(); !slices.Equal(got, []string{"o o:0@0 rc=0"}) {
		t.Fatalf("orderly deliveries: %v", got)
	}
	clk.Advance(999 * time.Millisecond)
	step(t, e.mg)
	if got := orderly.take(); len(got) != 0 {
		t.Fatalf("a suspended queue was consumed before SuspendInterval: %v", got)
	}
	clk.Advance(time.Millisecond)
	step(t, e.mg)
	if got := orderly.take(); !slices.Equal(got, []string{"o o:0@0 rc=1"}) {
		t.Fatalf("orderly retry after SuspendInterval: %v", got)
	}
}

// TestStepAfterClose: Step on a closed Manager is ErrClosed.
func TestStepAfterClose(t *testing.T) {
	e, _ := newSteppedEnv(t)
	if err := e.mg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.mg.Step(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Step after Close: %v, want ErrClosed", err)
	}
}
