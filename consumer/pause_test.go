package consumer

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/vfs"
)

// groupsFileVersion reads the version field of GroupsFile.
func groupsFileVersion(t *testing.T, fs vfs.FS) uint32 {
	t.Helper()
	b, err := vfs.ReadFile(fs, filepath.Join(cfgDir, GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[4:])
}

func startNamed(t *testing.T, mg *Manager, name string, topics ...string) *PushConsumer {
	t.Helper()
	c, err := mg.NewPushConsumer("g", Options{InstanceName: name, ConsumeFromWhere: ConsumeFromFirstOffset})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if err := c.Subscribe(tp, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(newCounter(1).handler(name)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGroupsFileVersion2: GroupsFile stays version 1 until a member
// unsubscribes from a topic others keep; then it is version 2, read back
// by a new Manager, and the instance that unsubscribed restores without
// the topic. When nobody keeps a topic, the file drops it and goes back to
// version 1. Frames a build cannot hold are ErrCorrupt.
func TestGroupsFileVersion2(t *testing.T) {
	st, fs := newFakeStore(nil), newMemFS()
	defer st.close()
	st.createTopic("t", 2)
	st.createTopic("u", 2)
	mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	a := startNamed(t, mg, "a", "t", "u")
	startNamed(t, mg, "b", "t", "u") // keeps u
	if v := groupsFileVersion(t, fs); v != FormatVersion {
		t.Fatalf("version %d before any unsubscribe", v)
	}
	if err := a.Unsubscribe("u"); err != nil {
		t.Fatal(err)
	}
	if v := groupsFileVersion(t, fs); v != GroupsVersion {
		t.Fatalf("version %d after an unsubscribe, want %d", v, GroupsVersion)
	}
	for _, q := range a.Assignment() {
		if q.Topic == "u" {
			t.Fatalf("a still holds %s", q)
		}
	}
	if err := mg.Close(); err != nil {
		t.Fatal(err)
	}

	mg, err = NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	a = startNamed(t, mg, "a") // restores
	a.m.mu.Lock()
	_, hasU := a.m.mu.subs["u"]
	_, hasT := a.m.mu.subs["t"]
	a.m.mu.Unlock()
	if hasU || !hasT {
		t.Fatalf("a restored t=%v u=%v, want t only", hasT, hasU)
	}
	c := startNamed(t, mg, "c") // another instance restores both
	c.m.mu.Lock()
	n := len(c.m.mu.subs)
	c.m.mu.Unlock()
	if n != 2 {
		t.Fatalf("c restored %d subscriptions, want 2", n)
	}
	if err := c.Unsubscribe("u"); err != nil { // the last live one on u
		t.Fatal(err)
	}
	gi, err := mg.Group("g")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gi.Subscriptions, []Subscription{{Topic: "t", Expression: "*"}}) {
		t.Fatalf("subscriptions %+v, want t only", gi.Subscriptions)
	}
	if v := groupsFileVersion(t, fs); v != FormatVersion {
		t.Fatalf("version %d once nothing is unsubscribed, want %d", v, FormatVersion)
	}
	if err := mg.Close(); err != nil {
		t.Fatal(err)
	}

	body := []byte(`{"groups":[{"name":"g","model":"Clustering","strategy":"Averagely","consumeFromWhere":"LastOffset","maxReconsumeTimes":16,` +
		`"subscriptions":[{"topic":"t","expr":"*"}],"unsubscribed":[{"instance":"a","topics":["t"]}]}]}`)
	bad := []byte(`{"groups":[{"name":"g","model":"Clustering","strategy":"Averagely","consumeFromWhere":"LastOffset","maxReconsumeTimes":16,` +
		`"subscriptions":[{"topic":"t","expr":"*"}],"unsubscribed":[{"instance":"a","topics":["u"]}]}]}`)
	for _, tc := range []struct {
		name    string
		version uint32
		body    []byte
		ok      bool
	}{
		{"version 2", GroupsVersion, body, true},
		{"version 1 with unsubscribed", FormatVersion, body, false},
		{"version 3", GroupsVersion + 1, body, false},
		{"unsubscribed topic not subscribed", GroupsVersion, bad, false},
	} {
		fs := newMemFS()
		if err := fs.MkdirAll(cfgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fs, cfgDir, GroupsFile, cfgfile.Frame(GroupsMagic, tc.version, tc.body)); err != nil {
			t.Fatal(err)
		}
		mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
		if !tc.ok {
			isErr(t, err, ErrCorrupt, tc.name)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c, err := mg.NewPushConsumer("g", Options{InstanceName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		isErr(t, c.Start(newCounter(1).handler("a")), ErrInvalidArgument, tc.name+": a unsubscribed from its only topic")
		if err := mg.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnsubscribeWriteFailure: when GroupsFile cannot be written,
// Unsubscribe fails and changes nothing: the member keeps the topic and
// its queues, the group keeps the subscription, the file is as it was.
func TestUnsubscribeWriteFailure(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem())
	st := newFakeStore(nil)
	defer st.close()
	st.createTopic("t", 2)
	st.createTopic("u", 2)
	mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	a := startNamed(t, mg, "a", "t", "u")
	startNamed(t, mg, "b", "t", "u") // keeps u
	before, err := vfs.ReadFile(fs, filepath.Join(cfgDir, GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	assigned := a.Assignment()
	fs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && filepath.Base(path) == GroupsFile+".tmp" {
			return errInjected
		}
		return nil
	})
	isErr(t, a.Unsubscribe("u"), errInjected, "Unsubscribe with the groups file unwritable")
	fs.SetInjector(nil)
	after, err := vfs.ReadFile(fs, filepath.Join(cfgDir, GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("a failed Unsubscribe changed GroupsFile")
	}
	if got := a.Assignment(); !slices.Equal(got, assigned) {
		t.Fatalf("assignment %v after a failed Unsubscribe, was %v", got, assigned)
	}
	if !a.m.subscribes("u") {
		t.Fatal("a failed Unsubscribe dropped the subscription")
	}
	if err := a.Unsubscribe("u"); err != nil {
		t.Fatalf("Unsubscribe once the file is writable: %v", err)
	}
}

// TestOrderlyPauseKeepsLock: a paused orderly queue keeps its group lock
// (no other member may take it) and its committed offset, and shows as
// paused in Stats; Resume clears it.
func TestOrderlyPauseKeepsLock(t *testing.T) {
	st := newFakeStore(nil)
	defer st.close()
	st.createTopic("t", 2)
	mg, err := NewManager(st, ManagerOptions{FS: newMemFS(), Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	c, err := mg.NewPushConsumer("g", Options{InstanceName: "a", Orderly: true, ConsumeFromWhere: ConsumeFromFirstOffset})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("t", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(newCounter(1).handler("a")); err != nil {
		t.Fatal(err)
	}
	q := Queue{Topic: "t", ID: 1}
	if h := c.m.g.lockHolder(q); h != "a" {
		t.Fatalf("lock of %s held by %q before Pause", q, h)
	}
	if err := c.Pause("t", 1); err != nil {
		t.Fatal(err)
	}
	if h := c.m.g.lockHolder(q); h != "a" {
		t.Fatalf("lock of %s held by %q while paused, want a", q, h)
	}
	var paused []Queue
	for _, qs := range c.Stats().Queues {
		if qs.Paused {
			paused = append(paused, qs.Queue)
		}
	}
	if !slices.Equal(paused, []Queue{q}) || !slices.Equal(c.Paused(), []Queue{q}) {
		t.Fatalf("paused %v / %v, want [%s]", paused, c.Paused(), q)
	}
	if err := c.Resume("t"); err != nil {
		t.Fatal(err)
	}
	if p := c.Paused(); len(p) != 0 {
		t.Fatalf("paused %v after Resume", p)
	}
	if h := c.m.g.lockHolder(q); h != "a" {
		t.Fatalf("lock of %s held by %q after Resume", q, h)
	}
}
