package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
)

// runJSON runs a command with -json, expects exit status want and decodes
// stdout, which must be one JSON document, into v.
func (f *fixture) runJSON(t *testing.T, v any, want int, args ...string) {
	t.Helper()
	out, errOut, code := f.run(t, append([]string{"--json"}, args...)...) // the GNU spelling works too
	require.Equal(t, want, code, "stderr: %s", errOut)
	dec := json.NewDecoder(strings.NewReader(out))
	require.NoError(t, dec.Decode(v), out)
	require.False(t, dec.More(), "one document: %s", out)
}

func TestJSON(t *testing.T) { testJSON(t, newFixture(t)) }

// Read-only, the JSON documents are the same.
func TestJSONReadOnly(t *testing.T) {
	readOnlyModes(t, func(t *testing.T, f *fixture, _ string) { testJSON(t, f) })
}

func testJSON(t *testing.T, f *fixture) {

	var topics []topicRow
	f.runJSON(t, &topics, 0, "topics")
	byName := map[string]topicRow{}
	for _, r := range topics {
		byName[r.Name] = r
	}
	require.Equal(t, topicRow{Name: "orders", Queues: 4, Messages: 10, Created: byName["orders"].Created}, byName["orders"])
	require.Equal(t, t0, *byName["orders"].Created, "the fixture's fake clock")
	require.True(t, byName["%RETRY%billing"].System)

	var st mqlite.Stats
	f.runJSON(t, &st, 0, "stats")
	require.EqualValues(t, 2033, st.CommitLog.WrotePosition, "13 records, as stats.golden says")
	require.Equal(t, st.CommitLog.WrotePosition, st.CommitLog.DispatchedPosition)
	require.Len(t, st.Groups, 1)
	require.Equal(t, "billing", st.Groups[0].Name)
	require.EqualValues(t, 8, st.Groups[0].Lag)
	require.Equal(t, int64(2), st.Groups[0].Queues[0].Committed)

	var groups []groupRow
	f.runJSON(t, &groups, 0, "consumers", "-group", "billing")
	require.Len(t, groups, 1)
	require.Equal(t, []string{"orders"}, groups[0].Subscriptions)
	require.EqualValues(t, 8, groups[0].Lag)

	var m jsonMessage
	f.runJSON(t, &m, 0, "get", f.bin.MsgID)
	require.Equal(t, f.bin.Body, m.Body, "base64 round trip")
	require.Equal(t, "audit", m.Topic)
	require.EqualValues(t, 1, m.QueueOffset)

	var hits []jsonMessage
	f.runJSON(t, &hits, 0, "query", "-topic", "orders", "-key", "order-2")
	require.Len(t, hits, 2)
	require.Equal(t, []string{f.ids[5], f.ids[4]}, []string{hits[0].MsgID, hits[1].MsgID}, "newest first")
	require.Equal(t, map[string]string{"amount": "500"}, hits[0].Properties)

	var tail []jsonMessage
	f.runJSON(t, &tail, 0, "tail", "-topic", "orders", "-queue", "0", "-n", "2")
	require.Len(t, tail, 2)
	require.EqualValues(t, []int64{1, 2}, []int64{tail[0].QueueOffset, tail[1].QueueOffset})

	var rep verifyResult
	f.runJSON(t, &rep, 0, "verify")
	require.True(t, rep.OK)
	require.EqualValues(t, 13, rep.Records)
	require.Empty(t, rep.Problems)

	var none []jsonMessage
	f.runJSON(t, &none, 1, "query", "-topic", "orders", "-key", "no-such-key")
	require.Empty(t, none)
}

// flipByte flips one byte of the CommitLog at global offset off.
func flipByte(t *testing.T, dir string, segSize, off int64) {
	t.Helper()
	fh, err := os.OpenFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", off/segSize*segSize)), os.O_RDWR, 0)
	require.NoError(t, err)
	defer fh.Close()
	var b [1]byte
	_, err = fh.ReadAt(b[:], off%segSize)
	require.NoError(t, err)
	b[0] ^= 0x01
	_, err = fh.WriteAt(b[:], off%segSize)
	require.NoError(t, err)
}

// bodyOffset is the CommitLog offset of the first body byte of a record
// (frame 28 bytes, then the payload's fixed fields and body length).
func bodyOffset(r mqlite.PutResult) int64 { return r.Offset + 28 + 56 }

// damageModes runs fn on a fixture as the tool sees it writable, with
// -readonly, and (if locked) while a Store of this process holds it, so
// that the tool falls back to read-only.
func damageModes(t *testing.T, locked bool, fn func(t *testing.T, f *fixture, hold func())) {
	t.Run("writable", func(t *testing.T) { fn(t, newFixture(t), func() {}) })
	t.Run("readonly", func(t *testing.T) {
		f := newFixture(t)
		f.args = []string{"-readonly"}
		fn(t, f, func() {})
	})
	if !locked {
		return
	}
	t.Run("locked", func(t *testing.T) {
		f := newFixture(t)
		fn(t, f, func() {
			s, err := mqlite.Open(f.dir, &f.opts)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
		})
	})
}

// TestVerifyDamageInOpenStore damages a record in the oldest of many
// segments, which recovery after a clean shutdown does not re-read: the
// store opens, and verify finds the damage, in every mode.
func TestVerifyDamageInOpenStore(t *testing.T) {
	damageModes(t, true, func(t *testing.T, f *fixture, hold func()) {
		s, err := mqlite.Open(f.dir, &f.opts)
		require.NoError(t, err)
		for i := range 2000 {
			_, err := s.Put(t.Context(), &mqlite.Message{Topic: "bulk", Body: []byte(strings.Repeat("b", 100+i%50))}, 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		victim := f.puts[6]
		flipByte(t, f.dir, f.opts.SegmentSize, bodyOffset(victim))
		hold()

		out, errOut, code := f.run(t, "verify")
		require.Equal(t, 1, code, "stderr: %s", errOut)
		require.Contains(t, out, "DAMAGED")
		require.Contains(t, out, "commitlog offset "+strconv.FormatInt(victim.Offset, 10)+" ")
		require.Contains(t, out, "consumequeue orders/2@1: points at commitlog offset "+strconv.FormatInt(victim.Offset, 10))

		var rep verifyResult
		f.runJSON(t, &rep, 1, "verify")
		require.False(t, rep.OK)
		require.Len(t, rep.Problems, 2)
		require.Empty(t, rep.OpenError)
		require.EqualValues(t, 2012, rep.Records, "every record but the damaged one")
	})
}

// TestVerifyDamageRefusedAtOpen damages a record that recovery reads:
// Open refuses the store (damage before data proven durable), and verify
// reports that with the offset. Read-only, the view reads past the damage
// to the true end: verify checks every record and names the damage, and
// stats shows the true queue maxima with a warning.
func TestVerifyDamageRefusedAtOpen(t *testing.T) {
	damageModes(t, false, func(t *testing.T, f *fixture, _ func()) {
		victim := f.puts[2]
		flipByte(t, f.dir, f.opts.SegmentSize, bodyOffset(victim))

		out, errOut, code := f.run(t, "verify")
		require.Equal(t, 1, code, "stderr: %s", errOut)
		require.Contains(t, out, "DAMAGED")
		if len(f.args) == 0 {
			require.Contains(t, out, fmt.Sprintf("at offset %d: checksum mismatch", victim.Offset))
			_, errOut, code = f.run(t, "topics")
			require.Equal(t, 1, code)
			require.Contains(t, errOut, "recovery found damage")
			return
		}
		require.Contains(t, out, fmt.Sprintf("commitlog offset %d ", victim.Offset))
		require.Contains(t, out, "checksum mismatch")
		var rep verifyResult
		f.runJSON(t, &rep, 1, "verify")
		require.EqualValues(t, 12, rep.Records, "every record but the damaged one")

		var st mqlite.Stats
		out, errOut, code = f.run(t, "-json", "stats")
		require.Equal(t, 0, code, "stderr: %s", errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Contains(t, errOut, fmt.Sprintf("warning: the CommitLog is damaged at offsets [%d, %d)", victim.Offset, f.puts[3].Offset))
		require.EqualValues(t, 2033, st.CommitLog.WrotePosition, "the true end")
		for _, ts := range st.Topics {
			if ts.Name == "orders" {
				for _, q := range ts.Queues {
					require.EqualValues(t, []int64{3, 3, 2, 2}[q.ID], q.MaxOffset, "orders queue %d", q.ID)
				}
			}
		}
	})
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"-dir", f.dir}, 2, "no command given"},
		{"unknown command", []string{"-dir", f.dir, "frobnicate"}, 2, `unknown command "frobnicate"`},
		{"missing dir", []string{"topics"}, 2, "-dir (the store directory) is required"},
		{"not a store", []string{"-dir", t.TempDir(), "topics"}, 2, "not an mqlite store (no commitlog directory)"},
		{"bad flag", []string{"-dir", f.dir, "topics", "-nope"}, 2, "flag provided but not defined: -nope"},
		{"bad msgID", []string{"-dir", f.dir, "get", "xyz"}, 2, `"xyz" is not a message ID`},
		{"ID above the largest offset", []string{"-dir", f.dir, "get", "FFFFFFFFFFFFFFFF"}, 2, `"FFFFFFFFFFFFFFFF" is not a message ID: it is above 7FFFFFFFFFFFFFFF`},
		{"lower-case ID", []string{"-dir", f.dir, "get", "00000000000000ab"}, 2, `it has lower-case digits`},
		{"get needs an ID", []string{"-dir", f.dir, "get"}, 2, "want <msgID>, got 0 argument(s)"},
		{"extra argument", []string{"-dir", f.dir, "topics", "x"}, 2, "want no arguments, got 1"},
		{"message not found", []string{"-dir", f.dir, "get", "00000000000FFFFF"}, 1, "mqlite get: message 00000000000FFFFF:"},
		{"query needs a key", []string{"-dir", f.dir, "query", "-topic", "orders"}, 2, "-topic and -key are required"},
		{"query bad time", []string{"-dir", f.dir, "query", "-topic", "orders", "-key", "k", "-from", "yesterday"}, 2, "not an RFC 3339 time"},
		{"query finds nothing", []string{"-dir", f.dir, "query", "-topic", "orders", "-key", "none"}, 1, "no message of topic orders"},
		{"print unknown topic", []string{"-dir", f.dir, "print", "-topic", "nope"}, 1, "topic nope"},
		{"print bad queue", []string{"-dir", f.dir, "print", "-topic", "orders", "-queue", "9"}, 2, "-queue 9 outside 0..3"},
		{"print offset and time", []string{"-dir", f.dir, "print", "-topic", "orders", "-offset", "1", "-time", "2024-01-01T00:00:00Z"}, 2, "exclude each other"},
		{"consumers unknown group", []string{"-dir", f.dir, "consumers", "-group", "nope"}, 1, "group nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runTool(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Contains(t, errOut, tc.msg)
		})
	}
}

func TestHelp(t *testing.T) {
	out, errOut, code := runTool(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rebuild-index")
	require.Empty(t, errOut)
	for _, c := range commands {
		_, errOut, code := runTool(t, c.name, "-h")
		require.Equal(t, 0, code, c.name)
		require.Contains(t, errOut, "usage: mqlite -dir DIR [-json] "+c.name, c.name)
		require.Contains(t, errOut, "-dir directory", c.name)
	}
}

// While another Store holds the directory, the commands that read open it
// read-only (and say so on stderr); rebuild-index refuses.
func TestLockedStore(t *testing.T) {
	f := newFixture(t)
	s, err := mqlite.Open(f.dir, &f.opts)
	require.NoError(t, err)
	defer s.Close()
	for _, cmd := range []string{"topics", "verify"} {
		_, errOut, code := f.run(t, cmd)
		require.Equal(t, 0, code, cmd)
		require.Contains(t, errOut, "mqlite "+cmd+": "+f.dir+" is in use by another process; reading it read-only", cmd)
	}
	_, errOut, code := f.run(t, "rebuild-index")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "mqlite rebuild-index: the store in "+f.dir+" is in use by another process")
	require.Contains(t, errOut, "rebuild-index writes the store: stop that process and retry")
}

// -readonly refuses rebuild-index before touching anything.
func TestRebuildRefusesReadOnly(t *testing.T) {
	f := newFixture(t)
	_, errOut, code := f.run(t, "-readonly", "rebuild-index")
	require.Equal(t, 2, code)
	require.Equal(t, "mqlite rebuild-index: rebuild-index writes the store, so it cannot run with -readonly\n", errOut)
}

func TestRebuildIndex(t *testing.T) {
	f := newFixture(t)
	before, _, code := f.run(t, "stats")
	require.Equal(t, 0, code)
	out, errOut, code := f.run(t, "rebuild-index")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fmt.Sprintf("rebuilt the ConsumeQueue and IndexFile of %s from 2033 CommitLog bytes\n", f.dir), out)
	after, _, code := f.run(t, "stats")
	require.Equal(t, 0, code)
	require.Equal(t, before, after)
	out, _, code = f.run(t, "query", "-topic", "orders", "-key", "order-2")
	require.Equal(t, 0, code)
	require.Contains(t, out, f.ids[5])
	_, _, code = f.run(t, "verify")
	require.Equal(t, 0, code)
}

// TestSalvageCommand salvages the fixture with one record damaged (a
// store Open refuses): exit 1, the dropped range named by file and
// offset, and the new store opens, verifies OK and holds the 12 other
// messages; salvaging the new store again drops nothing (exit 0), and an
// occupied target is a usage error.
func TestSalvageCommand(t *testing.T) {
	f := newFixture(t)
	victim := f.puts[2]
	flipByte(t, f.dir, f.opts.SegmentSize, bodyOffset(victim))
	dst := filepath.Join(t.TempDir(), "new")

	out, errOut, code := f.run(t, "salvage", dst)
	require.Equal(t, 1, code, "stderr: %s", errOut)
	require.Contains(t, out, "DROPPED")
	seg := filepath.Join(f.dir, "commitlog", fmt.Sprintf("%020d", 0))
	require.Contains(t, out, fmt.Sprintf("%s at %d: commitlog offsets [%d, %d)", seg, victim.Offset, victim.Offset, f.puts[3].Offset))
	require.Contains(t, out, "checksum mismatch")

	out, errOut, code = runTool(t, "-dir", dst, "verify")
	require.Equal(t, 0, code, "stderr: %s\n%s", errOut, out)
	require.Contains(t, out, "OK")
	var rep verifyResult
	out, errOut, code = runTool(t, "-dir", dst, "-json", "verify")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.EqualValues(t, 12, rep.Records)

	var srep mqlite.SalvageReport
	again := filepath.Join(t.TempDir(), "again")
	out, errOut, code = runTool(t, "-dir", dst, "-json", "salvage", again)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &srep))
	require.EqualValues(t, 12, srep.Copied)
	require.Empty(t, srep.Dropped)

	_, errOut, code = f.run(t, "salvage", dst)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "not empty")
}
