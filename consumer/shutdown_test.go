package consumer

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// Shutdown stops fetching, waits for running handler calls and commits
// them; Close cancels them. Both are idempotent.
func TestPushShutdownDrainsAndCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		started := make(chan struct{}, 10)
		gate := make(chan struct{})
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			started <- struct{}{}
			select {
			case <-gate:
				return ConsumeSuccess
			case <-ctx.Done():
				return ReconsumeLater
			}
		}
		c := e.push("g", Options{Goroutines: 2, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		for i := range 5 {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		synctest.Wait() // offsets 0 and 1 running, 2..4 cached
		done := make(chan error)
		go func() { done <- c.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) while handlers were running", err)
		default:
		}
		close(gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := len(started); n != 2 {
			t.Fatalf("%d handler calls; cached messages must not start after Shutdown", n)
		}
		if got := e.committed("g", "", "t", 0); got != 2 {
			t.Fatalf("committed %d, want 2", got)
		}
		if got := readOffsets(t, e.fs)["g//t/0"]; got != 2 {
			t.Fatalf("persisted %d, want 2", got)
		}
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// The next consumer resumes at 2.
		cnt := newCounter(3)
		c2 := e.push("g", Options{}, "t", cnt.handler("b"))
		synctest.Wait()
		if d, dups := cnt.dups(); d != 3 || dups != 0 || cnt.seen["2"] != 1 {
			t.Fatalf("resumed with %v", cnt.seen)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Shutdown whose ctx ends cancels the handlers and returns ctx.Err();
// Close cancels at once; neither commits an unfinished call.
func TestPushShutdownTimeoutAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			<-ctx.Done()
			return ReconsumeLater
		}
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		e.st.put("t", 0, "", "x")
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		isErr(t, c.Shutdown(ctx), context.DeadlineExceeded, "Shutdown past its deadline")
		if got := e.committed("g", "", "t", 0); got != 0 {
			t.Fatalf("committed %d", got)
		}
		if len(e.st.sentBack()) != 0 {
			t.Fatal("a cancelled call was sent back")
		}
		c2 := e.push("g2", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		synctest.Wait()
		start := time.Now()
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 0 {
			t.Fatal("Close waited")
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
		if got := e.committed("g2", "", "t", 0); got != 0 {
			t.Fatalf("committed %d", got)
		}
	})
}
