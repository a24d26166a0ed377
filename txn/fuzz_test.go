package txn_test

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// The progress file's header, as the service writes it.
const progressMagic, progressVersion = 0x4D515458, 1

// txnHistory runs three transactions, committed ("c"), unknown ("u") and
// rolled back ("r"), and a check round that leaves "u" unresolved, and
// returns the environment.
func txnHistory(t testing.TB) *env {
	e := newEnv(t, txn.ServiceOptions{})
	p := e.producer("g", checkerOf(txn.Unknown))
	for _, c := range []struct {
		body string
		s    txn.TxState
	}{{"c", txn.CommitMessage}, {"u", txn.Unknown}, {"r", txn.RollbackMessage}} {
		if _, err := p.SendInTransaction(context.Background(), msg(c.body), state(c.s)); err != nil {
			t.Fatal(err)
		}
	}
	e.checkNow(time.Minute)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return e
}

func progressBody(t testing.TB, e *env) []byte {
	b, err := vfs.ReadFile(e.fs, path.Join(configDir, txn.ProgressFile))
	if err != nil {
		t.Fatal(err)
	}
	return b[cfgfile.HeaderSize:]
}

// FuzzProgressFile loads progress files whose header is valid and whose
// body is anything, beside queues holding resolved and unresolved
// transactions. NewService never panics and either fails with ErrCorrupt
// naming the file, leaving it as it was, or gives a service that starts,
// resolves a new transaction, and restarts from what it saved.
func FuzzProgressFile(f *testing.F) {
	f.Add(progressBody(f, txnHistory(f)))
	for _, s := range []string{`{}`, `null`, `{"half":-1,"op":0}`, `{"half":9223372036854775807,"op":9223372036854775807}`,
		`{"half":1,"op":1e3}`, `{"half":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := txnHistory(t)
		written := cfgfile.Frame(progressMagic, progressVersion, body)
		if err := vfs.WriteFileAtomic(e.fs, configDir, txn.ProgressFile, written); err != nil {
			t.Fatal(err)
		}
		e.st.restart()
		svc, err := txn.NewService(e.st, e.opts)
		if err != nil {
			file := path.Join(configDir, txn.ProgressFile)
			if !errors.Is(err, txn.ErrCorrupt) || !strings.Contains(err.Error(), file) {
				t.Fatalf("NewService: %v, want ErrCorrupt naming %s", err, file)
			}
			if after, err := vfs.ReadFile(e.fs, file); err != nil || !bytes.Equal(after, written) {
				t.Fatalf("progress file changed by a refused load (%v)", err)
			}
			return
		}
		if err := e.svc.Close(); err != nil {
			t.Fatal(err)
		}
		e.svc = svc
		if err := svc.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		// A new transaction is resolved by a check-back and delivered. A
		// progress file behind the truth makes resolved transactions be
		// checked back again: the checker answers as the application
		// would, and nothing is delivered twice or after a rollback.
		p := e.producer("g", func(_ context.Context, m *message.MessageExt) txn.TxState {
			if string(m.Body) == "r" {
				return txn.RollbackMessage
			}
			return txn.CommitMessage
		})
		if _, err := p.SendInTransaction(context.Background(), msg("new"), state(txn.Unknown)); err != nil {
			t.Fatal(err)
		}
		e.checkNow(time.Minute)
		bodies := map[string]int{}
		for _, m := range e.st.messages("orders") {
			bodies[string(m.Body)]++
		}
		if bodies["c"] != 1 || bodies["new"] != 1 || bodies["r"] != 0 || bodies["u"] > 1 {
			t.Fatalf("delivered %v", bodies)
		}
		if n := e.svc.Pending(); n != 0 {
			t.Fatalf("%d pending after a check round that resolves everything", n)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		// What it saved loads again.
		if err := e.svc.Close(); err != nil {
			t.Fatal(err)
		}
		e.svc = e.newService()
		if err := e.svc.Start(); err != nil {
			t.Fatalf("Start after reopen: %v", err)
		}
	})
}

// TestSemanticallyBadProgressIsRefused: progress bodies that pass the
// header checks but could never have been written fail NewService with an
// ErrCorrupt naming the file, and change nothing.
func TestSemanticallyBadProgressIsRefused(t *testing.T) {
	e := txnHistory(t)
	if b, _ := vfs.ReadFile(e.fs, path.Join(configDir, txn.ProgressFile)); !bytes.Equal(b, cfgfile.Frame(progressMagic, progressVersion, progressBody(t, e))) {
		t.Fatal("the test's progress header is not the service's")
	}
	file := path.Join(configDir, txn.ProgressFile)
	for _, c := range []struct{ name, body, reason string }{
		{"null", `null`, "null"},
		{"array", `[1,2]`, "bad body"},
		{"negative half", `{"half":-1,"op":0}`, "negative offsets half=-1"},
		{"negative op", `{"half":0,"op":-9223372036854775808}`, "op=-9223372036854775808"},
		{"half as a string", `{"half":"3"}`, "bad body"},
		{"fractional op", `{"op":0.5}`, "bad body"},
		{"beyond int64", `{"half":9223372036854775808}`, "bad body"},
		{"deep nesting", `{"x":` + strings.Repeat(`{"x":`, 20000) + `1` + strings.Repeat(`}`, 20001), "bad body"},
	} {
		written := cfgfile.Frame(progressMagic, progressVersion, []byte(c.body))
		if err := vfs.WriteFileAtomic(e.fs, configDir, txn.ProgressFile, written); err != nil {
			t.Fatal(err)
		}
		_, err := txn.NewService(e.st, e.opts)
		if !errors.Is(err, txn.ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want ErrCorrupt naming %s and %q", c.name, err, file, c.reason)
		}
		if after, _ := vfs.ReadFile(e.fs, file); !bytes.Equal(after, written) {
			t.Errorf("%s: the file changed", c.name)
		}
	}
}
