package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

var errInjected = errors.New("injected I/O error")

// A failed config write fails Start and changes nothing; a failed offsets
// write is reported by PersistOffsets and Close and retried later.
func TestConfigWriteFailures(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem())
	st := newFakeStore(nil)
	defer st.close()
	st.createTopic("t", 1)
	mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	fs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && filepath.Base(path) == GroupsFile+".tmp" {
			return errInjected
		}
		return nil
	})
	c, _ := mg.NewPushConsumer("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset})
	if err := c.Subscribe("t", nil); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter(1)
	isErr(t, c.Start(cnt.handler("a")), errInjected, "Start with the groups file unwritable")
	if gs := mg.Groups(); len(gs) != 0 {
		t.Fatalf("a failed Start left groups %+v", gs)
	}
	fs.SetInjector(nil)
	if err := c.Start(cnt.handler("a")); err != nil {
		t.Fatalf("Start after the fault cleared: %v", err)
	}
	st.put("t", 0, "", "x")
	waitFor(t, cnt.done, "the message")

	fs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && filepath.Base(path) == OffsetsFile+".tmp" {
			return errInjected
		}
		return nil
	})
	isErr(t, mg.PersistOffsets(), errInjected, "PersistOffsets with a failing fsync")
	isErr(t, c.Close(), errInjected, "consumer Close with a failing fsync")
	isErr(t, mg.Close(), errInjected, "Manager.Close with a failing fsync")
	fs.SetInjector(nil)

	// What a power loss leaves: the offsets file never synced, so the group
	// starts over from its config (FirstOffset) — at-least-once.
	crashed := fs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	mg2, err := NewManager(st, ManagerOptions{FS: crashed, Dir: cfgDir})
	if err != nil {
		t.Fatal(err)
	}
	defer mg2.Close()
	if offs, _ := mg2.Offsets("g"); len(offs) != 0 {
		t.Fatalf("offsets %v survived without a sync", offs)
	}
	if gi, err := mg2.Group("g"); err != nil || gi.ConsumeFromWhere != ConsumeFromFirstOffset {
		t.Fatalf("group config after the power loss: %+v, %v", gi, err)
	}
}

// S35: after a power loss the recovered offset lies between the last
// persisted and the last committed one; it never passes the queue's max.
func TestOffsetsPowerLoss(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fs := vfs.NewFaulty(vfs.NewMem())
			st := newFakeStore(nil)
			defer st.close()
			st.createTopic("t", 1)
			mg, err := NewManager(st, ManagerOptions{FS: fs, Dir: cfgDir})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := mg.NewPullConsumer("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset})
			if err := c.Subscribe("t", nil); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 7))
			var persisted, committed int64
			for i := range 50 {
				st.put("t", 0, "", fmt.Sprint(i))
				msgs, err := c.Poll(context.Background(), 1)
				if err != nil {
					t.Fatal(err)
				}
				committed = msgs[0].QueueOffset + 1
				if err := c.CommitOffset("t", 0, committed); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(5) == 0 {
					if err := mg.PersistOffsets(); err != nil {
						t.Fatal(err)
					}
					persisted = committed
				}
			}
			crashed := fs.Crash(rng, 0.5)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mg.Close(); err != nil {
				t.Fatal(err)
			}
			mg2, err := NewManager(st, ManagerOptions{FS: crashed, Dir: cfgDir})
			if err != nil {
				t.Fatalf("reopen after power loss: %v", err)
			}
			defer mg2.Close()
			got := int64(0)
			if offs, _ := mg2.Offsets("g"); len(offs) == 1 {
				got = offs[0].Offset
			}
			if got < persisted || got > committed {
				t.Fatalf("recovered %d, outside [persisted %d, committed %d]", got, persisted, committed)
			}
		})
	}
}
