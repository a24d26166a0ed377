package mqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"strings"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/vfs"
)

// A fault test a user writes: the store runs on a fault-injecting
// in-memory file system; the disk fails the next CommitLog sync, and a
// power loss is simulated afterwards. A send that returned nil survives;
// the one that failed is reported, and the store refuses writes until it
// is reopened.
func ExampleOptions_fs() {
	ctx := context.Background()
	faulty := vfs.NewFaulty(vfs.NewMem())
	s, err := mqlite.Open("/orders", &mqlite.Options{FS: faulty, Flush: mqlite.FlushSync})
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("order 1")}, 0)
	if err != nil {
		log.Fatal(err)
	}

	// From now on every sync of a CommitLog file fails.
	broken := errors.New("disk failure")
	faulty.SetInjector(func(op vfs.Op, path string) error {
		if (op == vfs.OpSync || op == vfs.OpMapSync) && strings.Contains(path, "commitlog") {
			return broken
		}
		return nil
	})
	_, err = s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("order 2")}, 0)
	fmt.Println("send:", errors.Is(err, mqlite.ErrIO), errors.Is(err, broken))
	_, err = s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("order 3")}, 0)
	fmt.Println("fenced:", errors.Is(err, mqlite.ErrFenced))

	// The power goes: keep what the synced bytes (and a random half of
	// the unsynced pages) would leave, and recover from it.
	image := faulty.Crash(rand.New(rand.NewPCG(1, 2)), 0.5)
	fmt.Println("close:", errors.Is(s.Close(), mqlite.ErrFenced))
	s, err = mqlite.Open("/orders", &mqlite.Options{FS: image, Flush: mqlite.FlushSync})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := s.MessageByID(res.MsgID())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after power loss: %s\n", m.Body)
	// Output:
	// send: true true
	// fenced: true
	// close: true
	// after power loss: order 1
}
