package consumequeue

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

func TestStore(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		root := filepath.Join(filepath.Dir(filepath.Dir(e.dir)), "consumequeue")
		o := Options{FS: e.fs, Dir: root, EntriesPerFile: testPerFile}
		s, err := OpenStore(o)
		if err != nil {
			t.Fatal(err)
		}
		ids := []QueueID{{"%RETRY%group-1", 3}, {"SCHEDULE_TOPIC_XXXX", 2}, {"TopicA", 0}, {"TopicA", 1}}
		for k, id := range ids {
			q, err := s.Queue(id.Topic, id.ID, true)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "dir", q.Dir(), filepath.Join(root, id.Topic, strconv.Itoa(id.ID)))
			appendRange(t, q, 0, int64(10*(k+1)))
			again, err := s.Queue(id.Topic, id.ID, false)
			if err != nil || again != q {
				t.Fatalf("Queue(%v) again = %p, %v", id, again, err)
			}
		}
		equal(t, "Queues", s.Queues(), ids)
		equal(t, "MaxPhysEnd", s.MaxPhysEnd(), entryFor(39).End())

		_, err = s.Queue("Missing", 0, false)
		wantErr(t, err, ErrNotFound)
		for _, bad := range []string{"", "a/b", "..", ".", "a b", "topic\x00", strings.Repeat("x", MaxTopicLen+1)} {
			_, err := s.Queue(bad, 0, true)
			wantErr(t, err, ErrInvalidArgument)
		}
		_, err = s.Queue("TopicA", -1, true)
		wantErr(t, err, ErrInvalidArgument)
		if _, err := s.Queue(strings.Repeat("x", MaxTopicLen), 7, true); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		// Unknown entries in the tree are ignored.
		if err := e.fs.MkdirAll(filepath.Join(root, "bad topic"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := e.fs.MkdirAll(filepath.Join(root, "TopicA", "007"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, e.fs, filepath.Join(root, "TopicA", "notes"), []byte("x"))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = s.Queue("TopicA", 0, true)
		wantErr(t, err, ErrClosed)
		wantErr(t, s.Flush(), ErrClosed)

		s, err = OpenStore(o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// The queue of the 255-character topic got no entry: it left nothing.
		equal(t, "Queues after reopen", len(s.Queues()), 4)
		for k, id := range ids {
			q, err := s.Queue(id.Topic, id.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			checkRange(t, q, 0, int64(10*(k+1)))
		}
		// Recovery after the CommitLog was truncated inside entry 15.
		if err := s.TruncateAfterPhys(entryFor(15).Offset); err != nil {
			t.Fatal(err)
		}
		equal(t, "MaxPhysEnd", s.MaxPhysEnd(), entryFor(14).End())
		for k, id := range ids {
			q, _ := s.Queue(id.Topic, id.ID, false)
			checkRange(t, q, 0, min(int64(10*(k+1)), 15))
		}
		n, err := s.DeleteBelowPhys(entryFor(15).Offset)
		if err != nil || n != 0 { // every queue holds a single file or is retained
			t.Fatalf("DeleteBelowPhys = %d, %v", n, err)
		}
		q, _ := s.Queue("TopicA", 1, false)
		equal(t, "MinOffset after retention", q.MinOffset(), int64(15))
	})
}

func TestStoreRefusesBadQueue(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{FS: fs, Dir: "/cq", EntriesPerFile: testPerFile}
	s, err := OpenStore(o)
	if err != nil {
		t.Fatal(err)
	}
	for id := range 2 {
		q, err := s.Queue("T", id, true)
		if err != nil {
			t.Fatal(err)
		}
		appendRange(t, q, 0, 1)
	}
	s.Close()
	o.EntriesPerFile = 32
	_, err = OpenStore(o)
	wantErr(t, err, ErrIncompatible)
}
