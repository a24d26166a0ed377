package message

import (
	"fmt"
	"testing"
	"time"
)

// TestIDSpellings: a send result and a read message give their message ID
// through the same method, and the queue ids have one type.
func TestIDSpellings(t *testing.T) {
	r := NewPutResult(4096, 100, 3, 7, time.Time{}, "", nil)
	ext := &MessageExt{QueueID: r.QueueID, MsgID: ID(4096)}
	if r.ID() != ext.ID() || r.MsgID() != ext.MsgID || ext.ID() != ID(4096) {
		t.Fatalf("IDs differ: %s %s %s", r.ID(), ext.ID(), r.MsgID())
	}
	var q int = ext.QueueID // compiles only while both are int
	if q != r.QueueID {
		t.Fatalf("queue %d, want %d", q, r.QueueID)
	}
}

// TestIDDigits: a message ID is the offset's 16 upper-case hex digits,
// every digit in its place, and ParseID reads it back.
func TestIDDigits(t *testing.T) {
	for _, off := range []int64{0, 1, 0xF, 0x10, 0xAB, 0x1234_5678_9ABC_DEF0, 0x0FED_CBA9_8765_4321, 1<<63 - 1} {
		id := ID(off)
		if want := fmt.Sprintf("%016X", off); id != want {
			t.Fatalf("ID(%#x) = %s, want %s", off, id, want)
		}
		if back, err := ParseID(id); err != nil || back != off {
			t.Fatalf("ParseID(%s) = %#x, %v; want %#x", id, back, err, off)
		}
	}
}
