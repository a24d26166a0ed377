package mqlite

// S40 of the reliability plan, FuzzValidateNames: topic, group, tag and
// key names are accepted exactly when they match the documented grammar,
// and an accepted topic or group becomes a directory inside the store's
// own and nowhere else (names are path elements: consumequeue/<topic>/).

import (
	"context"
	"errors"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

var nameGrammar = regexp.MustCompile(`^[A-Za-z0-9_|%-]+$`)

func FuzzValidateNames(f *testing.F) {
	for _, s := range []string{"orders", "a|b", "%x", "..", ".", "a/b", "/abs", "a\x00b", "a b", "é", strings.Repeat("t", 127),
		strings.Repeat("t", 128), strings.Repeat("g", 121), "%RETRY%g", "%DLQ%g", "rmq_sys_x", "SCHEDULE_TOPIC_XXXX", "a||b", "\x01", ""} {
		f.Add(s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, topicName, group, tag, key string) {
		wantTopic := nameGrammar.MatchString(topicName) && len(topicName) <= 127 && !topic.IsSystem(topicName)
		wantGroup := nameGrammar.MatchString(group) && len(group) <= topic.MaxGroupLen
		wantTag := !strings.Contains(tag, "||") && !strings.ContainsFunc(tag, func(r rune) bool { return r < 0x20 || r == 0x7f })
		wantKey := key != "" && !strings.ContainsAny(key, " \x01\x02")
		if strings.Contains(topicName, "..") || strings.ContainsAny(topicName, "/\x00") || len(topicName) > 255 {
			if wantTopic {
				t.Fatalf("the grammar admits %q", topicName)
			}
		}

		fs := vfs.NewMem()
		const dir = "/names"
		s, err := openFS(fs, dir, &Options{Flush: FlushAsync, NoWarm: true, Clock: clock.NewFake(t0), SegmentSize: 64 << 10,
			ConsumeQueueEntries: 64, IndexSlots: 16, IndexEntries: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.CreateTopic(topicName, TopicConfig{Queues: 1})
		if (err == nil) != wantTopic {
			t.Fatalf("CreateTopic(%q): %v, want accepted %v", topicName, err, wantTopic)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("CreateTopic(%q): %v does not match ErrInvalidArgument", topicName, err)
		}
		if err != nil {
			topicName = "t"
			if err := s.CreateTopic(topicName, TopicConfig{Queues: 1}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = s.Put(context.Background(), &Message{Topic: topicName, Tags: tag, Keys: []string{key}, Body: []byte("x")}, 0)
		switch {
		case err == nil && !(wantTag && wantKey):
			t.Fatalf("Put with tag %q key %q accepted", tag, key)
		case err != nil && wantTag && wantKey:
			t.Fatalf("Put with tag %q key %q: %v", tag, key, err)
		case err != nil && !errors.Is(err, ErrInvalidArgument):
			t.Fatalf("Put with tag %q key %q: %v does not match ErrInvalidArgument", tag, key, err)
		}
		if err == nil {
			if err := s.WaitVisible(context.Background()); err != nil {
				t.Fatal(err)
			}
			q := path.Join(dir, "consumequeue", topicName, "0")
			if names, err := fs.ReadDir(q); err != nil || len(names) == 0 {
				t.Fatalf("topic %q: its queue is not at %s: %v %v", topicName, q, names, err)
			}
		}
		pc, err := s.NewPullConsumer(group, ConsumerOptions{})
		if (err == nil) != wantGroup {
			t.Fatalf("NewPullConsumer(%q): %v, want accepted %v", group, err, wantGroup)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("NewPullConsumer(%q): %v does not match ErrInvalidArgument", group, err)
		}
		if err == nil {
			pc.Close()
		}
		// Nothing outside the store's directory.
		if names, err := fs.ReadDir("/"); err != nil || len(names) != 1 || names[0] != "names" {
			t.Fatalf("the root holds %v (%v)", names, err)
		}
	})
}
