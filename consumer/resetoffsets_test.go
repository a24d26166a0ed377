package consumer

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// resetEnv is an env on a fake clock whose topic "t" has 2 queues of 5
// messages each, stored one second apart (queue q's offset i at base+i s),
// and a group "g" that consumed everything and stopped.
func resetEnv(t *testing.T, fs vfs.FS) (*env, time.Time) {
	t.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(base)
	st := newFakeStore(fake)
	st.createTopic("t", 2)
	for i := range 5 {
		for q := range 2 {
			st.put("t", q, "", "m")
		}
		if i < 4 {
			fake.Advance(time.Second)
		}
	}
	e := &env{t: t, st: st, fs: newMemFS(), clk: fake}
	if fs == nil {
		fs = e.fs
	}
	mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir, Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	e.mg = mg
	t.Cleanup(func() {
		e.mg.Close()
		st.close()
	})
	c := e.pull("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true}, "t")
	for got := 0; got < 10; {
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for q := range 2 {
		if off := e.committed("g", "", "t", q); off != 5 {
			t.Fatalf("queue %d committed %d after consuming all, want 5", q, off)
		}
	}
	return e, base
}

// ResetOffsets moves a stopped group back (and forward) to a time on every
// queue, persists it, and the group's next member starts there.
func TestResetOffsets(t *testing.T) {
	e, base := resetEnv(t, nil)
	got, err := e.mg.ResetOffsets("g", "t", base.Add(2500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueOffset{{Queue: Queue{"t", 0}, Offset: 3}, {Queue: Queue{"t", 1}, Offset: 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("ResetOffsets returned %v, want %v", got, want)
	}
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{{time.Time{}, 0}, {base.Add(time.Hour), 5}, {base.Add(time.Second), 1}} {
		got, err := e.mg.ResetOffsets("g", "t", tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Offset != tc.want || got[1].Offset != tc.want {
			t.Fatalf("reset to %v: %v, want offset %d on both queues", tc.at, got, tc.want)
		}
	}
	if err := e.mg.SetOffset("g", "t", 1, 4); err != nil {
		t.Fatal(err)
	}

	// Persisted: a new Manager on the files starts the group there.
	e.reopen()
	offs, err := e.mg.Offsets("g")
	if err != nil {
		t.Fatal(err)
	}
	want = []QueueOffset{{Queue: Queue{"t", 0}, Offset: 1}, {Queue: Queue{"t", 1}, Offset: 4}}
	if !slices.Equal(offs, want) {
		t.Fatalf("offsets after reopen %v, want %v", offs, want)
	}
	c := e.pull("g", Options{}, "t")
	defer c.Close()
	seen := map[int][]int64{}
	for n := 0; n < 5; {
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			seen[int(m.QueueID)] = append(seen[int(m.QueueID)], m.QueueOffset)
		}
		n += len(msgs)
	}
	if !slices.Equal(seen[0], []int64{1, 2, 3, 4}) || !slices.Equal(seen[1], []int64{4}) {
		t.Fatalf("delivered after the reset %v, want queue 0 from 1 and queue 1 from 4", seen)
	}
}

// A group with a member, running or still shutting down, is refused with
// ErrGroupActive, and its offsets stay as they are.
func TestResetOffsetsRefusesActiveGroup(t *testing.T) {
	e, base := resetEnv(t, nil)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	e.st.put("t", 0, "", "late")
	c := e.push("g", Options{Goroutines: 1}, "t", func(context.Context, []*message.MessageExt) ConsumeResult {
		entered <- struct{}{}
		<-release
		return ConsumeSuccess
	})
	waitFor(t, entered, "the handler call")
	_, err := e.mg.ResetOffsets("g", "t", base)
	isErr(t, err, ErrGroupActive, "ResetOffsets with a live member")
	isErr(t, e.mg.SetOffset("g", "t", 0, 0), ErrGroupActive, "SetOffset with a live member")

	// Shutting down: the member left the group, its handler still runs
	// and will commit.
	stopped := make(chan error, 1)
	go func() { stopped <- c.Shutdown(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for gi, _ := e.mg.Group("g"); len(gi.Members) > 0; gi, _ = e.mg.Group("g") {
		if time.Now().After(deadline) {
			t.Fatal("the member never left the group")
		}
		runtime.Gosched()
	}
	_, err = e.mg.ResetOffsets("g", "t", base)
	isErr(t, err, ErrGroupActive, "ResetOffsets while a member shuts down")
	close(release)
	if err := waitFor(t, stopped, "Shutdown"); err != nil {
		t.Fatal(err)
	}
	if off := e.committed("g", "", "t", 0); off != 6 {
		t.Fatalf("committed %d after the member's last commit, want 6", off)
	}
	if _, err := e.mg.ResetOffsets("g", "t", base); err != nil {
		t.Fatalf("ResetOffsets once the member stopped: %v", err)
	}
	if off := e.committed("g", "", "t", 0); off != 0 {
		t.Fatalf("committed %d after the reset, want 0", off)
	}
}

// Bad arguments are refused with their sentinel, and change nothing.
func TestResetOffsetsBadInput(t *testing.T) {
	e, base := resetEnv(t, nil)
	for _, tc := range []struct {
		what   string
		err    error
		target error
	}{
		{"empty group", e.mg.SetOffset("", "t", 0, 0), ErrInvalidArgument},
		{"bad group name", e.mg.SetOffset("g/1", "t", 0, 0), ErrInvalidArgument},
		{"unknown group", e.mg.SetOffset("nope", "t", 0, 0), ErrGroupNotFound},
		{"bad topic name", e.mg.SetOffset("g", "t t", 0, 0), ErrInvalidArgument},
		{"unknown topic", e.mg.SetOffset("g", "other", 0, 0), ErrTopicNotFound},
		{"queue past the topic's", e.mg.SetOffset("g", "t", 2, 0), ErrInvalidArgument},
		{"negative queue", e.mg.SetOffset("g", "t", -1, 0), ErrInvalidArgument},
		{"offset past the max", e.mg.SetOffset("g", "t", 0, 6), ErrInvalidArgument},
		{"negative offset", e.mg.SetOffset("g", "t", 0, -1), ErrInvalidArgument},
	} {
		isErr(t, tc.err, tc.target, tc.what)
	}
	_, err := e.mg.ResetOffsets("nope", "t", base)
	isErr(t, err, ErrGroupNotFound, "ResetOffsets of an unknown group")
	_, err = e.mg.ResetOffsets("g", "other", base)
	isErr(t, err, ErrTopicNotFound, "ResetOffsets on an unknown topic")
	want := []QueueOffset{{Queue: Queue{"t", 0}, Offset: 5}, {Queue: Queue{"t", 1}, Offset: 5}}
	if offs, _ := e.mg.Offsets("g"); !slices.Equal(offs, want) {
		t.Fatalf("offsets after refused resets %v, want %v", offs, want)
	}

	// After retention the queue's min is the lowest offset accepted.
	e.st.deleteBelow("t", 0, 2)
	isErr(t, e.mg.SetOffset("g", "t", 0, 1), ErrInvalidArgument, "offset below the min")
	if err := e.mg.SetOffset("g", "t", 0, 2); err != nil {
		t.Fatal(err)
	}

	e.mg.Close()
	_, err = e.mg.ResetOffsets("g", "t", base)
	isErr(t, err, ErrClosed, "ResetOffsets after Close")

	ro, err := NewManager(e.st, ManagerOptions{FS: vfs.ReadOnly(e.fs), Dir: cfgDir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = ro.ResetOffsets("g", "t", base)
	isErr(t, err, ErrReadOnly, "ResetOffsets on a read-only Manager")
}

// A reset whose offsets cannot be written fails, and leaves the offsets
// in memory and on disk as they were.
func TestResetOffsetsWriteFailure(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem())
	e, base := resetEnv(t, fs)
	fs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && filepath.Base(path) == OffsetsFile+".tmp" {
			return errInjected
		}
		return nil
	})
	_, err := e.mg.ResetOffsets("g", "t", base)
	isErr(t, err, errInjected, "ResetOffsets with the offsets file unwritable")
	isErr(t, e.mg.SetOffset("g", "other-new", 0, 0), ErrTopicNotFound, "SetOffset on an unknown topic")
	e.st.createTopic("u", 1)
	e.st.put("u", 0, "", "x")
	isErr(t, e.mg.SetOffset("g", "u", 0, 1), errInjected, "SetOffset on a new topic, unwritable")
	fs.SetInjector(nil)
	want := []QueueOffset{{Queue: Queue{"t", 0}, Offset: 5}, {Queue: Queue{"t", 1}, Offset: 5}}
	if offs, _ := e.mg.Offsets("g"); !slices.Equal(offs, want) {
		t.Fatalf("offsets after a failed reset %v, want %v", offs, want)
	}
	mg2, err := NewManager(e.st, ManagerOptions{FS: vfs.ReadOnly(fs), Dir: cfgDir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mg2.Close()
	if offs, _ := mg2.Offsets("g"); !slices.Equal(offs, want) {
		t.Fatalf("offsets on disk after a failed reset %v, want %v", offs, want)
	}
}

// In a broadcasting group every instance with offsets is reset.
func TestResetOffsetsBroadcasting(t *testing.T) {
	e, base := resetEnv(t, nil)
	for _, inst := range []string{"a", "b"} {
		c := e.pull("bc", Options{Model: Broadcasting, InstanceName: inst, ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true}, "t")
		for got := 0; got < 10; {
			msgs, err := c.Poll(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			got += len(msgs)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.mg.ResetOffsets("bc", "t", base.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var want []QueueOffset
	for _, inst := range []string{"a", "b"} {
		for q := range 2 {
			want = append(want, QueueOffset{Queue: Queue{"t", q}, Instance: inst, Offset: 1})
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ResetOffsets returned %v, want %v", got, want)
	}
	if offs, _ := e.mg.Offsets("bc"); !slices.Equal(offs, want) {
		t.Fatalf("Offsets %v, want %v", offs, want)
	}
	if err := e.mg.SetOffset("bc", "t", 1, 5); err != nil {
		t.Fatal(err)
	}
	if e.committed("bc", "a", "t", 1) != 5 || e.committed("bc", "b", "t", 1) != 5 || e.committed("bc", "a", "t", 0) != 1 {
		t.Fatalf("SetOffset of a broadcasting group: offsets %v", must(e.mg.Offsets("bc")))
	}
}

func must[T any](v T, _ error) T { return v }
