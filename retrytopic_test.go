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
