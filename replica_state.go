package mqlite

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// The replication state file (config/replication.json, a cfgfile) is
// what an admin tool reads about a store that takes part in replication
// without opening it: rewritten every ReplicationOptions.MetadataInterval
// by a primary serving replicas (with their acknowledged positions) and
// by a replica receiving metadata, and at Promote.
const (
	replStateFile    = "replication.json"
	replStateMagic   = 0x5352514D // "MQRS"
	replStateVersion = 1
)

// ReplicationState is what a store directory records about replication
// (ReadReplicationState).
type ReplicationState struct {
	StoreID StoreID `json:"-"`
	Epochs  []Epoch `json:"-"`
	// The rest is as of Updated.
	Role       Role          `json:"role"`
	Updated    time.Time     `json:"updated"`
	End        int64         `json:"end"`                   // the store's CommitLog end
	PrimaryEnd int64         `json:"primary_end,omitempty"` // a replica's primary's, as last heard
	Replicas   []ReplicaInfo `json:"replicas,omitempty"`    // a primary's attached replicas
}

// ReadReplicationState reads what the store in dir records about
// replication (its epoch file and replication state file) without opening
// it, on fs (nil: the operating system's). A store that never took part
// in replication has neither: ErrNotFound.
func ReadReplicationState(dir string, fs vfs.FS) (ReplicationState, error) {
	if fs == nil {
		fs = vfs.OS
	}
	var st ReplicationState
	e, efound, err := loadEpochs(fs, dir)
	if err != nil {
		return st, err
	}
	found, err := cfgfile.Read(fs, filepath.Join(dir, configDir), replStateFile, replStateMagic, replStateVersion, &st)
	if err != nil {
		return st, err
	}
	if !efound && !found {
		return st, fmt.Errorf("mqlite: %s has no replication state: %w", dir, errs.ErrNotFound)
	}
	st.StoreID, st.Epochs = e.id, e.epochs
	return st, nil
}

// saveState writes the replication state file; failures are logged only
// (it is informational).
func (r *replication) saveState(primaryEnd int64) {
	s := r.s
	st := ReplicationState{Role: s.Role(), Updated: s.opts.Clock.Now(), End: s.log.WrotePosition(), PrimaryEnd: primaryEnd}
	if st.Role == Primary {
		st.Replicas = s.Replicas()
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if err := cfgfile.Write(s.fs, s.path(configDir), replStateFile, replStateMagic, replStateVersion, st); err != nil {
		s.opts.Logger.Warn("mqlite: write the replication state", "err", err)
	}
}
