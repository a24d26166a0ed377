package mqlite

import (
	"errors"
	"testing"
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
