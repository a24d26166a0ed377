package txn

import (
	"fmt"
	"path/filepath"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// Progress file, in the store's config directory.
const (
	ProgressFile    = "txnProgress.json"
	progressMagic   = 0x4D515458 // "MQTX"
	progressVersion = 1
)

// progress is what the service persists: every half message below Half is
// resolved, and no op record below Op names a half message at or above
// Half. Replaying the queues from there rebuilds the pending set and the
// check counts.
type progress struct {
	Half int64 `json:"half"`
	Op   int64 `json:"op"`
}

func loadProgress(fs vfs.FS, dir string) (progress, error) {
	var p progress
	if _, err := cfgfile.Read(fs, dir, ProgressFile, progressMagic, progressVersion, &p); err != nil {
		return progress{}, err
	}
	if p.Half < 0 || p.Op < 0 {
		return progress{}, errs.Corrupt(filepath.Join(dir, ProgressFile), cfgfile.HeaderSize, "negative offsets half=%d op=%d", p.Half, p.Op)
	}
	return p, nil
}

// progressLocked is the progress the in-memory state allows: up to the
// oldest unresolved message, or to the read cursors when none is.
func (s *Service) progressLocked() progress {
	p := progress{Half: s.mu.halfNext, Op: s.mu.opNext}
	for _, e := range s.mu.pending {
		if e.off < p.Half {
			p = progress{Half: e.off, Op: e.opAt}
		}
	}
	return p
}

// saveProgress writes the progress file if it changed. The caller holds
// s.round.
func (s *Service) saveProgress() error {
	s.mu.Lock()
	p := s.progressLocked()
	s.mu.Unlock()
	if p == s.saved {
		return nil
	}
	if err := cfgfile.Write(s.opts.FS, s.opts.Dir, ProgressFile, progressMagic, progressVersion, p); err != nil {
		return fmt.Errorf("mqlite/txn: save progress: %w", err)
	}
	s.saved = p
	return nil
}

// clampCursors moves read cursors that lie past the end of their queue
// (the queues lost their tail, e.g. to a power loss under asynchronous
// flush, after the progress was saved) back to the end. The caller holds
// s.round.
func (s *Service) clampCursors() error {
	hmax, err := s.maxOffset(topic.Half)
	if err != nil {
		return err
	}
	omax, err := s.maxOffset(topic.OpHalf)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.halfNext > hmax || s.mu.opNext > omax {
		s.log.Warn("mqlite/txn: progress lies past the end of the transaction queues; moved back",
			"half", s.mu.halfNext, "half_max", hmax, "op", s.mu.opNext, "op_max", omax)
		s.mu.halfNext = min(s.mu.halfNext, hmax)
		s.mu.opNext = min(s.mu.opNext, omax)
		s.mu.resolved = offsetSet{base: s.mu.halfNext}
	}
	return nil
}
