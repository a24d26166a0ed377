package mqlite

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEnsureRetryTopic(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.EnsureRetryTopic("g1"); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureRetryTopic("g1"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if max, err := s.MaxOffset("%RETRY%g1", 0); err != nil || max != 0 {
		t.Fatalf("retry queue: max %d, %v", max, err)
	}
	if err := s.EnsureRetryTopic("bad group!"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad group: %v", err)
	}
}

func TestCommitOffsetPersists(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.CommittedOffset("g", "T", 1); ok || err != nil {
		t.Fatalf("fresh: %v %v", ok, err)
	}
	if err := s.CommitOffset("g", "T", 1, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitOffset("g", "T", 1, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative: %v", err)
	}
	if err := s.CommitOffset("bad group!", "T", 1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad group: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if off, ok, err := s.CommittedOffset("g", "T", 1); !ok || err != nil || off != 7 {
		t.Fatalf("after reopen: %d %v %v", off, ok, err)
	}
}

func TestReadQueueFiltered(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("F", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := s.Put(ctx, &Message{Topic: "F", Tags: []string{"a", "b"}[i%2], Body: []byte{byte(i)}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := Tag("b")
	if err != nil {
		t.Fatal(err)
	}
	got, next, err := s.ReadQueueFiltered(ctx, "F", 0, 0, 10, f)
	if err != nil || next != 6 || len(got) != 3 {
		t.Fatalf("filtered: %d messages, next %d, %v", len(got), next, err)
	}
	for i, m := range got {
		if m.Tags != "b" || m.QueueOffset != int64(2*i+1) {
			t.Fatalf("message %d: tags %q offset %d", i, m.Tags, m.QueueOffset)
		}
	}
	all, next, err := s.ReadQueueFiltered(ctx, "F", 0, 4, 10, nil)
	if err != nil || next != 6 || len(all) != 2 {
		t.Fatalf("unfiltered: %d, next %d, %v", len(all), next, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, next, err := s.ReadQueueFiltered(short, "F", 0, 6, 10, f); !errors.Is(err, context.DeadlineExceeded) || next != 6 {
		t.Fatalf("long poll at the end: next %d, %v", next, err)
	}
}
