package mqlite

import (
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/txn"
)

// checkConfig loads every config file that the services created later in
// open read (delay and timer progress, transaction progress, consumer
// groups and offsets) and returns the first one's error, before Open
// changes anything (the abort marker, a CommitLog repair, the indexes, the
// system topics): a damaged file fails Open with the store as it was. The
// services read the files again; nothing can change them meanwhile, since
// the directory lock is held. (The topic registry and the store format are
// loaded before this.)
func (s *Store) checkConfig() error {
	if _, err := delay.LoadProgress(s.fs, s.path(configDir)); err != nil {
		return err
	}
	if _, err := delay.LoadTimerState(s.fs, s.path(configDir)); err != nil {
		return err
	}
	tx, err := txn.NewService(txnHost{s}, txn.ServiceOptions{FS: s.fs, Dir: s.path(configDir), ReadOnly: true})
	if err != nil {
		return err
	}
	tx.Close() // read-only, never started: nothing to stop or save
	mg, err := consumer.NewManager(consumerSource{s}, consumer.ManagerOptions{FS: s.fs, Dir: s.path(configDir),
		ParseFilter: parseFilter, ReadOnly: true})
	if err != nil {
		return err
	}
	return mg.Close() // read-only: no goroutine, no write
}
