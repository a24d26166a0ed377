package mqlite

import (
	"fmt"
	"reflect"
)

// ReplicationStats is the replication part of Stats: the store's role and
// epoch and, on a primary, where each attached replica stands; on a
// replica, where it stands against its primary. Offsets are CommitLog
// byte offsets, lags are bytes.
type ReplicationStats struct {
	// Role is Primary or Replica, as now (Promote changes it).
	Role Role
	// Mode is Options.Replication.Mode (it applies on a primary only).
	Mode ReplicationMode
	// Epoch is the current epoch's number (see Epochs): the primary term
	// this store serves or follows; 0 for a store that never took part in
	// replication.
	Epoch int64

	// Replicas are a primary's attached replicas in attach order (as
	// Store.Replicas): acknowledged written and flushed offsets, lag
	// behind this store's CommitLog end, in sync or not. Empty on a
	// replica.
	Replicas []ReplicaInfo
	// InSync counts the Replicas in sync: a ReplicationSync send needs
	// MinInSyncReplicas of them.
	InSync int

	// Following reports whether a ReplicateFrom runs (a replica).
	Following bool
	// PrimaryAddr is the primary's address when the stream given to
	// ReplicateFrom has a RemoteAddr method (a net.Conn), else "".
	PrimaryAddr string
	// ReplicatedOffset is a replica's CommitLog end: how much of the
	// primary's log it holds.
	ReplicatedOffset int64
	// PrimaryEnd is the primary's CommitLog end as the replica last heard
	// (0 before it heard any), and Lag is PrimaryEnd - ReplicatedOffset
	// (never negative).
	PrimaryEnd, Lag int64
}

// replicationStats fills Stats.Replication.
func (s *Store) replicationStats() ReplicationStats {
	r := &s.repl
	st := ReplicationStats{Role: s.Role(), Mode: s.opts.Replication.Mode}
	r.mu.Lock()
	if n := len(r.mu.epochs.epochs); n > 0 {
		st.Epoch = r.mu.epochs.epochs[n-1].Number
	}
	following, addr := r.mu.follow != nil, r.mu.primaryAddr
	r.mu.Unlock()
	if st.Role == Primary {
		if rs := s.Replicas(); len(rs) > 0 {
			st.Replicas = rs
		}
		for _, ri := range st.Replicas {
			if ri.InSync {
				st.InSync++
			}
		}
		return st
	}
	st.Following, st.PrimaryAddr = following, addr
	st.ReplicatedOffset = s.log.WrotePosition()
	st.PrimaryEnd = r.primaryEnd.Load()
	st.Lag = max(st.PrimaryEnd-st.ReplicatedOffset, 0)
	return st
}

// remoteAddr is conn's RemoteAddr().String() when it has such a method
// (a net.Conn; the root package imports no network code), else "".
func remoteAddr(conn any) string {
	m := reflect.ValueOf(conn).MethodByName("RemoteAddr")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return ""
	}
	out := m.Call(nil)[0]
	if k := out.Kind(); (k == reflect.Interface || k == reflect.Pointer) && out.IsNil() {
		return ""
	}
	if a, ok := out.Interface().(fmt.Stringer); ok {
		return a.String()
	}
	return ""
}
