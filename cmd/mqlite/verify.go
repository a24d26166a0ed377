package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mqlite/mqlite"
)

// verifyResult is what "verify -json" prints: the report, and the error
// when recovery refused to open the damaged store.
type verifyResult struct {
	mqlite.VerifyReport
	OpenError string `json:",omitempty"`
}

func runVerify(e *env, _ []string) int {
	s, err := e.openStore()
	if errors.Is(err, mqlite.ErrCorrupt) {
		// Recovery proved damage and changed nothing: that is the answer.
		res := verifyResult{OpenError: err.Error()}
		res.Problems = []string{"the store cannot be opened: " + err.Error()}
		return e.printVerify(res)
	}
	if err != nil {
		return e.openFailed(err)
	}
	bar := newProgressBar(e.stderr)
	rep, err := s.Verify(context.Background(), bar.update)
	bar.done()
	cerr := s.Close()
	if err != nil {
		return e.fail(exitUsage, "verify "+e.dir, err)
	}
	code := e.printVerify(verifyResult{VerifyReport: rep})
	if cerr != nil {
		return max(code, e.fail(exitUsage, "close "+e.dir, cerr))
	}
	return code
}

// printVerify prints the result; exit status 1 unless it is OK.
func (e *env) printVerify(res verifyResult) int {
	code := exitOK
	if !res.OK {
		code = exitProblem
	}
	if e.json {
		if res.Problems == nil {
			res.Problems = []string{}
		}
		return max(code, e.printJSON(res))
	}
	w := e.stdout
	t := newTable(w, "RECORDS", "BYTES", "QUEUES", "ENTRIES", "PROBLEMS", "STATUS")
	status := "OK"
	if !res.OK {
		status = "DAMAGED"
	}
	t.row(res.Records, res.Bytes, res.Queues, res.Entries, len(res.Problems)+res.Omitted, status)
	t.flush()
	if len(res.Problems) > 0 {
		fmt.Fprintln(w, "\nproblems:")
		for _, p := range res.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if res.Omitted > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", res.Omitted)
		}
	}
	return code
}

// progressBar draws Verify's progress on a terminal; on anything else it
// draws nothing.
type progressBar struct {
	w       io.Writer // nil: not a terminal
	lastPct int
}

func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	if !ok {
		return &progressBar{}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &progressBar{}
	}
	return &progressBar{w: w, lastPct: -1}
}

func (p *progressBar) update(done, total int64) {
	if p.w == nil {
		return
	}
	pct := 100
	if total > 0 {
		pct = int(done * 100 / total)
	}
	if pct == p.lastPct {
		return
	}
	p.lastPct = pct
	const width = 40
	n := pct * width / 100
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < n {
			bar[i] = '#'
		}
	}
	fmt.Fprintf(p.w, "\rverify [%s] %3d%% %s / %s", bar, pct, mib(done), mib(total))
}

func (p *progressBar) done() {
	if p.w != nil && p.lastPct >= 0 {
		fmt.Fprintln(p.w)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func runRebuild(e *env, _ []string) int {
	if e.readOnly {
		return e.openFailed(mqlite.ErrReadOnly)
	}
	o, err := e.options()
	if err != nil {
		return e.fail(exitUsage, "rebuild indexes of "+e.dir, err)
	}
	rep, err := mqlite.RebuildIndexes(e.dir, o)
	if err != nil {
		if errors.Is(err, mqlite.ErrInvalidArgument) {
			return e.fail(exitUsage, "rebuild indexes of "+e.dir, err)
		}
		return e.openFailed(err)
	}
	if e.json {
		return e.printJSON(rep)
	}
	fmt.Fprintf(e.stdout, "rebuilt the ConsumeQueue and IndexFile of %s from %d CommitLog bytes\n", e.dir, rep.Redispatched)
	return exitOK
}
