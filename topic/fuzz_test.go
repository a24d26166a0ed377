package topic

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

const fuzzDir = "/s/config"

// writeBody stores body as the registry file, behind a valid header.
func writeBody(t testing.TB, fs vfs.FS, body []byte) []byte {
	t.Helper()
	b := cfgfile.Frame(fileMagic, fileVersion, body)
	require.NoError(t, fs.MkdirAll(fuzzDir, 0o755))
	require.NoError(t, vfs.WriteFileAtomic(fs, fuzzDir, File, b))
	return b
}

// seedBodies are registry bodies the registry itself wrote.
func seedBodies(t testing.TB) [][]byte {
	fs := vfs.NewMem()
	r, err := Open(fs, fuzzDir, func() time.Time { return t0 })
	require.NoError(t, err)
	read := func() []byte {
		b, err := vfs.ReadFile(fs, filepath.Join(fuzzDir, File))
		require.NoError(t, err)
		return b[cfgfile.HeaderSize:]
	}
	require.NoError(t, r.Create("orders", Config{Queues: 8}))
	one := read()
	_, err = r.Ensure(RetryTopic("billing"), Config{Queues: 1}, true)
	require.NoError(t, err)
	_, err = r.EnsureAtLeast(Schedule, 18)
	require.NoError(t, err)
	require.NoError(t, r.Create("a-b_c|d%e", Config{Queues: MaxQueues}))
	return [][]byte{one, read()}
}

// FuzzRegistryFile loads registry files whose header is valid and whose
// body is anything: Open never panics and either fails with ErrCorrupt,
// leaving the file as it was, or returns a registry whose every topic is
// legal and which takes changes and reopens to the same topics.
func FuzzRegistryFile(f *testing.F) {
	for _, b := range seedBodies(f) {
		f.Add(b)
	}
	for _, s := range []string{`{}`, `null`, `[]`, `{"t":null}`, `{"t":{"queues":-1}}`, `{"":{"queues":1}}`,
		`{"SCHEDULE_TOPIC_XXXX":{"queues":1}}`, `{"t":{"queues":1,"system":true}}`, `{"t":{"queues":"1"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fs := vfs.NewMem()
		written := writeBody(t, fs, body)
		r, err := Open(fs, fuzzDir, func() time.Time { return t0 })
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			require.Contains(t, err.Error(), File)
			after, err := vfs.ReadFile(fs, filepath.Join(fuzzDir, File))
			require.NoError(t, err)
			require.Equal(t, written, after, "a refused file is left as it was")
			return
		}
		before := r.Topics()
		for _, info := range before {
			if info.System {
				require.NoError(t, ValidateSystem(info.Name))
			} else {
				require.NoError(t, ValidateName(info.Name))
			}
			require.NoError(t, info.Config.validate())
			c, err := r.Get(info.Name)
			require.NoError(t, err)
			require.Equal(t, info.Config, c)
		}
		// Changes go through and survive a reopen.
		if r.Queues("fuzz-new") == 0 {
			require.NoError(t, r.Create("fuzz-new", Config{Queues: 2}))
		}
		_, err = r.EnsureAtLeast(Timer, 1)
		require.NoError(t, err)
		_, err = r.Ensure(DLQTopic("fuzz"), Config{Queues: 1}, true)
		require.NoError(t, err)
		r2, err := Open(fs, fuzzDir, func() time.Time { return t0 })
		require.NoError(t, err)
		require.Equal(t, r.Topics(), r2.Topics())
		for _, info := range before {
			_, err := r2.Get(info.Name)
			require.NoError(t, err, "topic %q lost", info.Name)
		}
	})
}

// TestSemanticallyBadRegistryIsRefused: bodies that pass the header checks
// but break the registry's rules fail Open with an ErrCorrupt naming the
// file and the bad topic or field. A null body was a panic at the first
// change (assignment to a nil map) before it was refused.
func TestSemanticallyBadRegistryIsRefused(t *testing.T) {
	cases := []struct{ name, body, reason string }{
		{"null body (fuzz crasher)", `null`, "null"},
		{"array body", `[]`, "bad body"},
		{"null record", `{"t":null}`, `topic "t"`},
		{"zero queues", `{"t":{"queues":0}}`, "0 queues"},
		{"negative queues", `{"t":{"queues":-1}}`, "-1 queues"},
		{"too many queues", `{"t":{"queues":16385}}`, "16385 queues"},
		{"huge queues", `{"t":{"queues":9223372036854775807}}`, "9223372036854775807 queues"},
		{"queues as a string", `{"t":{"queues":"4"}}`, "bad body"},
		{"queues as a fraction", `{"t":{"queues":1.5}}`, "bad body"},
		{"empty name", `{"":{"queues":1}}`, `topic ""`},
		{"illegal character", `{"a/b":{"queues":1}}`, `topic "a/b"`},
		{"user name too long", `{"` + strings.Repeat("x", 128) + `":{"queues":1}}`, "128 bytes"},
		{"system name not marked system", `{"SCHEDULE_TOPIC_XXXX":{"queues":18}}`, "reserved"},
		{"retry topic not marked system", `{"%RETRY%g":{"queues":1}}`, "reserved"},
		{"user name marked system", `{"orders":{"queues":1,"system":true}}`, "not a system topic"},
		{"system name too long", `{"%DLQ%` + strings.Repeat("x", 251) + `":{"queues":1,"system":true}}`, "256 bytes"},
		{"deep nesting", `{"t":{"queues":1,"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, "bad body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			written := writeBody(t, fs, []byte(c.body))
			_, err := Open(fs, fuzzDir, time.Now)
			require.ErrorIs(t, err, errs.ErrCorrupt)
			require.Contains(t, err.Error(), filepath.Join(fuzzDir, File))
			require.Contains(t, err.Error(), c.reason)
			after, err := vfs.ReadFile(fs, filepath.Join(fuzzDir, File))
			require.NoError(t, err)
			require.Equal(t, written, after)
		})
	}
}
