package mqlite

import (
	"context"

	"github.com/mqlite/mqlite/internal/errs"
)

// enter is the first check of every exported Store method that takes a
// context: a nil Store or a nil ctx is an error matching
// ErrInvalidArgument, never a panic.
func (s *Store) enter(ctx context.Context, op string) error {
	if s == nil {
		return errs.NilReceiver("mqlite.Store")
	}
	if ctx == nil { // the name is built only for the error: enter is on every Put's path
		return errs.CheckContext(ctx, "mqlite: "+op)
	}
	return nil
}
