package consumer

import (
	"context"
	"errors"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// A read-only Manager reads the persisted groups and offsets, starts no
// goroutine, refuses consumers and offset writes, and writes nothing on
// Close (its FS refuses every change).
func TestReadOnlyManager(t *testing.T) {
	fs := vfs.NewMem()
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
	for i := range 3 {
		st.put("t", 0, "", "m")
		if _, err := c.Poll(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if err := c.CommitOffset("t", 0, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := mg.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := NewManager(st, ManagerOptions{FS: vfs.ReadOnly(fs), Dir: cfgDir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	lag, err := ro.Lag("g")
	if err != nil || len(lag) != 1 || lag[0].Committed != 3 || lag[0].Lag != 0 {
		t.Fatalf("Lag of the persisted group: %+v, %v", lag, err)
	}
	if _, err := ro.NewPushConsumer("g", Options{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("NewPushConsumer: %v", err)
	}
	if _, err := ro.NewPullConsumer("h", Options{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("NewPullConsumer: %v", err)
	}
	if err := ro.PersistOffsets(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("PersistOffsets: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	empty, err := NewManager(st, ManagerOptions{FS: vfs.ReadOnly(vfs.NewMem()), Dir: "/none", ReadOnly: true})
	if err != nil {
		t.Fatalf("a missing config directory: %v", err)
	}
	if gs := empty.Groups(); len(gs) != 0 {
		t.Fatalf("groups from nowhere: %v", gs)
	}
	if err := empty.Close(); err != nil {
		t.Fatal(err)
	}
}
