package message

import (
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
