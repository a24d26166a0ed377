package consumer

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// The committed offset stops below a message still being processed, however
// many later messages finished.
func TestCommitNeverPassesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		for i := range 10 {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		release := make(chan struct{})
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			if string(msgs[0].Body) == "3" {
				select {
				case <-release:
				case <-ctx.Done():
					return ReconsumeLater
				}
			}
			return ConsumeSuccess
		}
		c := e.push("g", Options{Goroutines: 4, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		synctest.Wait()
		if s := c.Stats(); s.Consumed != 9 {
			t.Fatalf("consumed %d, want 9", s.Consumed)
		}
		if got := e.committed("g", "", "t", 0); got != 3 {
			t.Fatalf("committed %d while offset 3 is in flight", got)
		}
		if err := e.mg.PersistOffsets(); err != nil {
			t.Fatal(err)
		}
		if got := readOffsets(t, e.fs)["g//t/0"]; got != 3 {
			t.Fatalf("persisted %d", got)
		}
		close(release)
		synctest.Wait()
		if got := e.committed("g", "", "t", 0); got != 10 {
			t.Fatalf("committed %d after the slow message finished, want 10", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// readOffsets decodes the offsets file: "group/instance/topic/queue" -> offset.
func readOffsets(t *testing.T, fs vfs.FS) map[string]int64 {
	t.Helper()
	var body offsetsBody
	out := map[string]int64{}
	found, err := readConfig(fs, cfgDir, OffsetsFile, OffsetsMagic, &body)
	if err != nil {
		t.Fatalf("read offsets: %v", err)
	}
	if !found {
		return out
	}
	for _, r := range body.Offsets {
		out[fmt.Sprintf("%s/%s/%s/%d", r.Group, r.Instance, r.Topic, r.Queue)] = r.Offset
	}
	return out
}

// Offsets are written every PersistInterval (on the clock) and on Close;
// after a crash delivery resumes from the last write: what was committed
// after it is delivered again, nothing is skipped.
func TestOffsetsPersistedPeriodicallyAndResumedAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.st.close()
		defer e.mg.Close()
		e.st.createTopic("t", 1)
		var mu sync.Mutex
		var got []string
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, bodies(msgs)...)
			return ConsumeSuccess
		}
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		for i := range 10 {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		synctest.Wait()
		if e.committed("g", "", "t", 0) != 10 {
			t.Fatal("not all consumed")
		}
		if got, ok := readOffsets(t, e.fs)["g//t/0"]; ok && got != 0 {
			t.Fatalf("persisted %d before the interval passed", got)
		}
		fake.Advance(DefaultPersistInterval)
		synctest.Wait()
		if got := readOffsets(t, e.fs)["g//t/0"]; got != 10 {
			t.Fatalf("persisted %d after the interval, want 10", got)
		}
		for i := 10; i < 15; i++ {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		synctest.Wait()
		// Crash: only what was persisted survives.
		crashed := vfs.NewMem()
		copyFiles(t, e.fs, crashed)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.mg.Close(); err != nil {
			t.Fatal(err)
		}
		e2 := &env{t: t, st: e.st, fs: crashed, clk: fake}
		e2.open()
		defer e2.mg.Close()
		got = nil
		c2 := e2.push("g", Options{}, "t", h)
		synctest.Wait()
		mu.Lock()
		slices.Sort(got) // concurrent consumption: any order
		if strings.Join(got, ",") != "10,11,12,13,14" {
			t.Fatalf("after the crash got %v, want 10..14 again", got)
		}
		mu.Unlock()
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e2.mg.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func copyFiles(t *testing.T, from, to vfs.FS) {
	t.Helper()
	names, err := from.ReadDir(cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := to.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := vfs.ReadFile(from, filepath.Join(cfgDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(to, cfgDir, n, b); err != nil {
			t.Fatal(err)
		}
	}
}

// Offsets, group configs and subscriptions survive a Manager close/reopen.
func TestOffsetsAndGroupsSurviveReopen(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 2)
	e.st.createTopic("u", 1)
	for i := range 6 {
		e.st.put("t", i%2, "a", fmt.Sprint(i))
	}
	c, _ := e.mg.NewPullConsumer("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true})
	if err := c.Subscribe("t", tagFilter{[]string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("u", nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < 6 {
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		n += len(msgs)
	}
	bc := e.push("b", Options{Model: Broadcasting, InstanceName: "n1", ConsumeFromWhere: ConsumeFromFirstOffset}, "t", newCounter(6).handler("n1"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bc.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := e.mg.Offsets("g")
	e.reopen()
	after, err := e.mg.Offsets("g")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) || len(after) != 3 {
		t.Fatalf("offsets before %v, after %v", before, after)
	}
	for _, o := range after {
		if o.Topic == "t" && o.Offset != 3 {
			t.Fatalf("offset %+v, want 3", o)
		}
	}
	gi, err := e.mg.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	if gi.Model != Clustering || gi.ConsumeFromWhere != ConsumeFromFirstOffset || len(gi.Subscriptions) != 2 ||
		gi.Subscriptions[0] != (Subscription{Topic: "t", FilterType: "TAG", Expression: "a"}) ||
		gi.Subscriptions[1] != (Subscription{Topic: "u", Expression: "*"}) {
		t.Fatalf("group after reopen %+v", gi)
	}
	if gb, _ := e.mg.Group("b"); gb.Model != Broadcasting {
		t.Fatalf("group b after reopen %+v", gb)
	}
	if bo, _ := e.mg.Offsets("b"); len(bo) != 2 || bo[0].Instance != "n1" {
		t.Fatalf("broadcast offsets %+v", bo)
	}
	if len(e.mg.Groups()) != 2 {
		t.Fatalf("groups %+v", e.mg.Groups())
	}
}

// A push consumer started without Subscribe takes its group's persisted
// subscriptions, rebuilding filters with ParseFilter.
func TestRestoreSubscriptions(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	c, _ := e.mg.NewPushConsumer("g", Options{})
	if err := c.Subscribe("t", tagFilter{[]string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(newCounter(1).handler("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.mg.Close(); err != nil {
		t.Fatal(err)
	}
	// Without ParseFilter the TAG filter cannot be rebuilt.
	e.open()
	c2, _ := e.mg.NewPushConsumer("g", Options{})
	isErr(t, c2.Start(newCounter(1).handler("x")), ErrInvalidArgument, "restore without ParseFilter")
	if err := e.mg.Close(); err != nil {
		t.Fatal(err)
	}
	var parsed []string
	mg, err := NewManager(e.st, ManagerOptions{FS: e.fs, Dir: cfgDir, ParseFilter: func(typ, expr string) (Filter, error) {
		parsed = append(parsed, typ+":"+expr)
		return tagFilter{[]string{expr}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.mg = mg
	cnt := newCounter(1)
	c3, _ := e.mg.NewPushConsumer("g", Options{})
	if err := c3.Start(cnt.handler("x")); err != nil {
		t.Fatal(err)
	}
	e.st.put("t", 0, "b", "skip")
	e.st.put("t", 0, "a", "take")
	waitFor(t, cnt.done, "the filtered message")
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	if len(parsed) != 1 || parsed[0] != "TAG:a" || cnt.seen["skip"] != 0 || cnt.seen["take"] != 1 {
		t.Fatalf("parsed %v, seen %v", parsed, cnt.seen)
	}
}

// ConsumeFromWhere decides where a group without offsets starts; a
// committed offset wins over it.
func TestConsumeFromWhere(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, fake)
	e.st.createTopic("t", 1)
	for i := range 10 {
		e.st.put("t", 0, "", fmt.Sprint(i))
		fake.Advance(time.Second)
	}
	e.st.deleteBelow("t", 0, 2) // min 2, max 10
	cases := []struct {
		group string
		o     Options
		want  int64
	}{
		{"last", Options{}, 10},
		{"first", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, 2},
		{"time", Options{ConsumeFromWhere: ConsumeFromTimestamp, ConsumeTimestamp: time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)}, 5},
		{"default-time", Options{ConsumeFromWhere: ConsumeFromTimestamp}, 2}, // 30 min back: everything left
	}
	for _, c := range cases {
		p := e.pull(c.group, c.o, "t")
		if pos, err := p.Position("t", 0); err != nil || pos != c.want {
			t.Fatalf("%s: starts at %d (%v), want %d", c.group, pos, err, c.want)
		}
		if got := e.committed(c.group, "", "t", 0); got != c.want {
			t.Fatalf("%s: start not committed: %d", c.group, got)
		}
		if err := p.CommitOffset("t", 0, c.want); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A new group starts every queue of a topic at ConsumeFromWhere.
	e.st.createTopic("m", 4)
	e.st.putMany("m", 40, "x")
	p4 := e.pull("multi", Options{}, "m")
	for q := range 4 {
		if pos, _ := p4.Position("m", q); pos != 10 {
			t.Fatalf("new group, queue %d starts at %d, want the max 10", q, pos)
		}
	}
	if err := p4.Close(); err != nil {
		t.Fatal(err)
	}
	// The committed offset wins: "time" was committed at 5; FirstOffset is ignored.
	p := e.pull("time", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t")
	if pos, _ := p.Position("t", 0); pos != 5 {
		t.Fatalf("committed group restarted at %d, want 5", pos)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// A committed offset below the queue's min (retention deleted the
// messages) moves to the min and the skip is reported; one past the max is
// capped at the max.
func TestOffsetOutOfRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 2)
		for i := range 10 {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		e.mg.offsets.cell(offsetKey{"g", "", "t", 0}, 1)
		e.mg.offsets.cell(offsetKey{"g", "", "t", 1}, 7) // queue 1 is empty
		e.st.deleteBelow("t", 0, 6)
		cnt := newCounter(4)
		c := e.push("g", Options{}, "t", cnt.handler("a"))
		synctest.Wait()
		if d, _ := cnt.dups(); d != 4 || cnt.seen["6"] != 1 {
			t.Fatalf("seen %v", cnt.seen)
		}
		if s := c.Stats(); s.Skipped != 5 {
			t.Fatalf("skipped %d, want 5", s.Skipped)
		}
		if got := e.committed("g", "", "t", 1); got != 0 {
			t.Fatalf("queue 1 committed %d, want 0 (capped at max)", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Damaged config files are refused with ErrCorrupt naming the file.
func TestDamagedConfigFiles(t *testing.T) {
	good, err := encodeFile(OffsetsMagic, offsetsBody{Offsets: []offsetRecord{{Group: "g", Topic: "t", Queue: 0, Offset: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	negative, _ := encodeFile(OffsetsMagic, offsetsBody{Offsets: []offsetRecord{{Group: "g", Topic: "t", Offset: -1}}})
	badModel, _ := encodeFile(GroupsMagic, groupsBody{Groups: []groupRecord{{Name: "g", Model: "Chaos", Strategy: "Averagely", ConsumeFromWhere: "LastOffset"}}})
	cases := []struct {
		name, file, reason string
		data               []byte
	}{
		{"flipped body byte", OffsetsFile, "CRC", mutate(func(b []byte) []byte { b[len(b)-3] ^= 0x20; return b })},
		{"flipped CRC", OffsetsFile, "CRC", mutate(func(b []byte) []byte { b[12] ^= 1; return b })},
		{"truncated", OffsetsFile, "length", mutate(func(b []byte) []byte { return b[:len(b)-1] })},
		{"short", OffsetsFile, "header", good[:7]},
		{"bad magic", OffsetsFile, "magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"unknown version", OffsetsFile, "version 2", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], 2); return b })},
		{"old version", OffsetsFile, "version 0", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], 0); return b })},
		{"negative offset", OffsetsFile, "invalid", negative},
		{"groups: offsets magic", GroupsFile, "magic", good},
		{"groups: unknown model", GroupsFile, "Chaos", badModel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := fs.MkdirAll(cfgDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfs.WriteFileAtomic(fs, cfgDir, c.file, c.data); err != nil {
				t.Fatal(err)
			}
			mg, err := NewManager(newFakeStore(nil), ManagerOptions{FS: fs, Dir: cfgDir})
			if err == nil {
				mg.Close()
				t.Fatal("damaged file accepted")
			}
			isErr(t, err, ErrCorrupt, c.name)
			if !strings.Contains(err.Error(), filepath.Join(cfgDir, c.file)) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q does not name the file and %q", err, c.reason)
			}
		})
	}
}

// Lag is max offset minus committed, per queue, for subscribed topics.
func TestLag(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 2)
	for i := range 10 {
		e.st.put("t", i%2, "", fmt.Sprint(i))
	}
	_, err := e.mg.Lag("nobody")
	isErr(t, err, ErrGroupNotFound, "Lag of an unknown group")
	_, err = e.mg.Offsets("nobody")
	isErr(t, err, ErrGroupNotFound, "Offsets of an unknown group")
	c := e.pull("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t")
	msgs, err := c.Poll(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := c.CommitOffset(m.Topic, int(m.QueueID), m.QueueOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	lag, err := e.mg.Lag("g")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, l := range lag {
		if l.Lag != l.MaxOffset-l.Committed || l.MaxOffset != 5 {
			t.Fatalf("lag %+v", l)
		}
		total += l.Lag
	}
	if len(lag) != 2 || total != 10-int64(len(msgs)) {
		t.Fatalf("lag %+v, total %d", lag, total)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
