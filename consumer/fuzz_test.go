package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

// fuzzParseFilter is the ParseFilter of the fuzz targets: a TAG filter of
// the tags in expr. Another type is an ErrInvalidArgument, as the store's.
func fuzzParseFilter(typ, expr string) (Filter, error) {
	if typ != "TAG" {
		return nil, fmt.Errorf("unknown filter type %q: %w", typ, ErrInvalidArgument)
	}
	return tagFilter{strings.Split(expr, " || ")}, nil
}

// seedConfigBodies runs a Manager over a fake store (clustering and
// broadcasting groups, a filter, committed offsets) and returns the bodies
// of the groups and offsets files it wrote.
func seedConfigBodies(t testing.TB) (groups, offsets []byte) {
	st, fs := newFakeStore(nil), newMemFS()
	defer st.close()
	st.createTopic("t", 2)
	st.createTopic("u", 1)
	st.putMany("t", 6, "m")
	mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir, ParseFilter: fuzzParseFilter})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := mg.NewPullConsumer("g1", Options{ConsumeFromWhere: ConsumeFromFirstOffset})
	if err == nil {
		err = c1.Subscribe("t", nil)
	}
	for got := 0; err == nil && got < 6; {
		var msgs []*message.MessageExt
		msgs, err = c1.Poll(context.Background(), 6-got)
		got += len(msgs)
	}
	if err == nil {
		err = c1.CommitOffset("t", 0, 2)
	}
	c2, err2 := mg.NewPullConsumer("g2", Options{Model: Broadcasting, InstanceName: "i-1", Strategy: ConsistentHash,
		ConsumeFromWhere: ConsumeFromTimestamp, MaxReconsumeTimes: 3})
	if err2 == nil {
		err2 = errors.Join(c2.Subscribe("u", tagFilter{[]string{"a", "b"}}), c2.Subscribe("t", nil))
	}
	if err = errors.Join(err, err2, mg.PersistOffsets(), c1.Close(), c2.Close(), mg.Close()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := vfs.ReadFile(fs, filepath.Join(cfgDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b[cfgfile.HeaderSize:]
	}
	return read(GroupsFile), read(OffsetsFile)
}

// FuzzGroupsFile loads groups files whose header is valid and whose body
// is anything; see checkConfigLoad.
func FuzzGroupsFile(f *testing.F) {
	groups, _ := seedConfigBodies(f)
	f.Add(groups)
	for _, s := range []string{`{}`, `null`, `{"groups":null}`, `{"groups":[null]}`, `{"groups":{}}`,
		`{"groups":[{"name":"g","model":"Clustering","strategy":"Averagely","consumeFromWhere":"LastOffset","subscriptions":[null]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkConfigLoad(t, GroupsFile, GroupsMagic, body) })
}

// FuzzOffsetsFile loads offsets files whose header is valid and whose
// body is anything; see checkConfigLoad.
func FuzzOffsetsFile(f *testing.F) {
	_, offsets := seedConfigBodies(f)
	f.Add(offsets)
	for _, s := range []string{`{}`, `null`, `{"offsets":null}`, `{"offsets":[null]}`,
		`{"offsets":[{"group":"g","topic":"t","queue":1,"offset":9223372036854775807}]}`,
		`{"offsets":[{"group":"g","topic":"t","queue":9,"offset":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkConfigLoad(t, OffsetsFile, OffsetsMagic, body) })
}

// checkConfigLoad stores body as config file name (behind a valid header)
// beside the other file as a real Manager wrote it, and opens a Manager: it
// must not panic, and either fails with ErrCorrupt naming the file, leaving
// both files as they were, or loads groups and offsets that work: every
// group reports its offsets and lag, a member of each group starts and
// stops, a new group consumes and commits, and a reopen keeps every group
// and offset.
func checkConfigLoad(t *testing.T, name string, magic uint32, body []byte) {
	groups, offsets := seedConfigBodies(t)
	st, fs := newFakeStore(nil), newMemFS()
	defer st.close()
	st.createTopic("t", 2)
	st.createTopic("u", 1)
	st.putMany("t", 6, "m")
	files := map[string][]byte{
		GroupsFile:  cfgfile.Frame(GroupsMagic, FormatVersion, groups),
		OffsetsFile: cfgfile.Frame(OffsetsMagic, FormatVersion, offsets),
	}
	files[name] = cfgfile.Frame(magic, FormatVersion, body)
	if err := fs.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		if err := vfs.WriteFileAtomic(fs, cfgDir, n, b); err != nil {
			t.Fatal(err)
		}
	}
	o := ManagerOptions{FS: fs, Dir: cfgDir, ParseFilter: fuzzParseFilter}
	mg, err := NewManager(st, o)
	if err != nil {
		isErr(t, err, ErrCorrupt, "NewManager")
		if !strings.Contains(err.Error(), filepath.Join(cfgDir, name)) {
			t.Fatalf("error %q does not name %s", err, name)
		}
		for n, b := range files {
			after, err := vfs.ReadFile(fs, filepath.Join(cfgDir, n))
			if err != nil || !bytes.Equal(after, b) {
				t.Fatalf("%s changed by a refused load (%v)", n, err)
			}
		}
		return
	}
	defer mg.Close()
	before := mg.offsets.snapshot("")
	ctx := context.Background()
	for _, gi := range mg.Groups() {
		if _, err := mg.Offsets(gi.Name); err != nil {
			t.Fatalf("Offsets(%s): %v", gi.Name, err)
		}
		if _, err := mg.Lag(gi.Name); err != nil {
			t.Fatalf("Lag(%s): %v", gi.Name, err)
		}
		// A member restores the persisted subscriptions and rebalances.
		c, err := mg.NewPushConsumer(gi.Name, Options{Model: gi.Model, Strategy: gi.Strategy})
		if err != nil {
			t.Fatalf("NewPushConsumer(%s): %v", gi.Name, err)
		}
		err = c.Start(func(context.Context, []*message.MessageExt) ConsumeResult { return ConsumeSuccess })
		if err != nil && !errors.Is(err, ErrInvalidArgument) { // a persisted filter may not parse
			t.Fatalf("Start(%s): %v", gi.Name, err)
		}
		if err := c.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown(%s): %v", gi.Name, err)
		}
	}
	const fresh = "zz-fuzz-fresh"
	if _, err := mg.Group(fresh); errors.Is(err, ErrGroupNotFound) {
		c, err := mg.NewPullConsumer(fresh, Options{ConsumeFromWhere: ConsumeFromFirstOffset})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("t", nil); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Poll(ctx, 1)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("Poll: %d messages, %v", len(msgs), err)
		}
		if err := c.CommitOffset(msgs[0].Topic, int(msgs[0].QueueID), msgs[0].QueueOffset+1); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	groupNames := func(mg *Manager) []string {
		var out []string
		for _, gi := range mg.Groups() {
			out = append(out, gi.Name)
		}
		return out
	}
	names := groupNames(mg)
	after := mg.offsets.snapshot("")
	if err := mg.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range before { // members move offsets (an offset past the end back to it), and keep them
		if !slices.ContainsFunc(after, func(a offsetRecord) bool {
			return a.Group == r.Group && a.Instance == r.Instance && a.Topic == r.Topic && a.Queue == r.Queue
		}) {
			t.Fatalf("offset %+v lost while open", r)
		}
	}
	mg2, err := NewManager(st, o)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer mg2.Close()
	if got := groupNames(mg2); !slices.Equal(got, names) {
		t.Fatalf("groups after reopen %v, want %v", got, names)
	}
	if got := mg2.offsets.snapshot(""); !slices.Equal(got, after) {
		t.Fatalf("offsets after reopen %+v, want %+v", got, after)
	}
}

// TestSemanticallyBadConfigIsRefused: groups and offsets bodies that pass
// the header checks but break the rules every write obeys fail NewManager
// with an ErrCorrupt naming the file and the bad field, and change
// nothing.
func TestSemanticallyBadConfigIsRefused(t *testing.T) {
	group := func(fields string) string {
		return `{"groups":[{"name":"g","model":"Clustering","strategy":"Averagely","consumeFromWhere":"LastOffset"` + fields + `}]}`
	}
	offset := func(rec string) string { return `{"offsets":[` + rec + `]}` }
	cases := []struct{ name, file, body, reason string }{
		{"groups: null body", GroupsFile, `null`, "null"},
		{"groups: wrong type", GroupsFile, `{"groups":{}}`, "bad body"},
		{"groups: null group", GroupsFile, `{"groups":[null]}`, "empty"},
		{"groups: bad name", GroupsFile, `{"groups":[{"name":"a b","model":"Clustering"}]}`, "character"},
		{"groups: unknown strategy", GroupsFile, strings.Replace(group(""), "Averagely", "Random", 1), "Random"},
		{"groups: listed twice", GroupsFile, `{"groups":[` + group("")[11:len(group(""))-2] + `,` + group("")[11:len(group(""))-2] + `]}`, "listed twice"},
		{"groups: negative maxReconsumeTimes", GroupsFile, group(`,"maxReconsumeTimes":-1`), "maxReconsumeTimes -1"},
		{"groups: huge maxReconsumeTimes", GroupsFile, group(`,"maxReconsumeTimes":1048577`), "maxReconsumeTimes 1048577"},
		{"groups: null subscription", GroupsFile, group(`,"subscriptions":[null]`), "subscription topic"},
		{"groups: illegal subscription topic", GroupsFile, group(`,"subscriptions":[{"topic":"a/b","expr":"*"}]`), `"a/b"`},
		{"groups: subscribed twice", GroupsFile, group(`,"subscriptions":[{"topic":"t","expr":"*"},{"topic":"t","expr":"*"}]`), "two subscriptions"},
		{"offsets: null body", OffsetsFile, `null`, "null"},
		{"offsets: wrong type", OffsetsFile, `{"offsets":[1]}`, "bad body"},
		{"offsets: null record", OffsetsFile, offset(`null`), "group: empty"},
		{"offsets: bad group", OffsetsFile, offset(`{"group":"g/1","topic":"t","queue":0,"offset":1}`), "group: character"},
		{"offsets: bad instance", OffsetsFile, offset(`{"group":"g","instance":"i 1","topic":"t","queue":0,"offset":1}`), "instance: character"},
		{"offsets: no topic", OffsetsFile, offset(`{"group":"g","queue":0,"offset":1}`), "topic:"},
		{"offsets: illegal topic", OffsetsFile, offset(`{"group":"g","topic":"../t","queue":0,"offset":1}`), "topic:"},
		{"offsets: negative queue", OffsetsFile, offset(`{"group":"g","topic":"t","queue":-1,"offset":1}`), "queue -1"},
		{"offsets: huge queue", OffsetsFile, offset(`{"group":"g","topic":"t","queue":16384,"offset":1}`), "queue 16384"},
		{"offsets: negative offset", OffsetsFile, offset(`{"group":"g","topic":"t","queue":0,"offset":-5}`), "negative offset -5"},
		{"offsets: offset beyond int64", OffsetsFile, offset(`{"group":"g","topic":"t","queue":0,"offset":9223372036854775808}`), "bad body"},
		{"offsets: twice", OffsetsFile, offset(`{"group":"g","topic":"t","queue":0,"offset":1},{"group":"g","topic":"t","queue":0,"offset":2}`), "second offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := newMemFS()
			if err := fs.MkdirAll(cfgDir, 0o755); err != nil {
				t.Fatal(err)
			}
			written := cfgfile.Frame(map[string]uint32{GroupsFile: GroupsMagic, OffsetsFile: OffsetsMagic}[c.file], FormatVersion, []byte(c.body))
			if err := vfs.WriteFileAtomic(fs, cfgDir, c.file, written); err != nil {
				t.Fatal(err)
			}
			mg, err := NewManager(newFakeStore(nil), ManagerOptions{FS: fs, Dir: cfgDir})
			if err == nil {
				mg.Close()
				t.Fatal("bad file accepted")
			}
			isErr(t, err, ErrCorrupt, c.name)
			if !strings.Contains(err.Error(), filepath.Join(cfgDir, c.file)) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q does not name the file and %q", err, c.reason)
			}
			if after, err := vfs.ReadFile(fs, filepath.Join(cfgDir, c.file)); err != nil || !bytes.Equal(after, written) {
				t.Fatalf("file changed (%v)", err)
			}
		})
	}
}

// An offset for a queue the topic no longer has (deleted and created
// again with fewer queues) is kept, and Lag leaves it out instead of
// failing. Found by FuzzOffsetsFile.
func TestLagSkipsQueuesTheTopicLost(t *testing.T) {
	_, offsets := seedConfigBodies(t)
	body := strings.Replace(string(offsets), `"queue":0`, `"queue":2`, 1) // topic t has queues 0 and 1
	checkConfigLoad(t, OffsetsFile, OffsetsMagic, []byte(body))
	checkConfigLoad(t, OffsetsFile, OffsetsMagic, []byte(`{"offsets":[{"group":"g1","topic":"t","queue":2}]}`))
}
