package vfs_test

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"

	"github.com/mqlite/mqlite/vfs"
)

// What a power-loss image keeps: the bytes of a file as of its last
// successful sync, and its directory entry once the directory is synced.
// A sync the injector fails leaves the durable image as it was.
func ExampleFaulty() {
	fs := vfs.NewFaulty(vfs.NewMem())
	if err := fs.MkdirAll("/data", 0o700); err != nil {
		log.Fatal(err)
	}
	f, err := fs.OpenFile("/data/log", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("synced."), 0); err != nil {
		log.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	if err := fs.SyncDir("/data"); err != nil {
		log.Fatal(err)
	}

	if _, err := f.WriteAt([]byte("lost"), 7); err != nil {
		log.Fatal(err)
	}
	failing := errors.New("injected")
	fs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			return failing
		}
		return nil
	})
	fmt.Println("sync:", f.Sync())

	// p = 0: keep only what was synced.
	image := fs.Crash(rand.New(rand.NewPCG(1, 1)), 0)
	b, err := vfs.ReadFile(image, "/data/log")
	fmt.Printf("after power loss: %q %v\n", b, err)
	// Output:
	// sync: injected
	// after power loss: "synced." <nil>
}
