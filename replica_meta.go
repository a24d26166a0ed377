package mqlite

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// Metadata follow (RocketMQ's SlaveSynchronize). The body of a metadata
// frame is JSON: the primary's topics, and the bytes of the config files
// a promoted replica starts its services from. The timer service's state
// is not among them: a promoted replica buckets the timer queue again
// from its own position (a timer may fire twice, none is lost).
type metaBody struct {
	Topics []metaTopic       `json:"topics"`
	Files  map[string][]byte `json:"files"`
}

type metaTopic struct {
	Name   string `json:"name"`
	Queues int    `json:"queues"`
	System bool   `json:"system,omitempty"`
}

// followedFiles are the config files a replica takes from its primary.
var followedFiles = []string{consumer.GroupsFile, consumer.OffsetsFile, delay.ProgressFile, txn.ProgressFile}

// sendMetadata writes a metadata frame: the consumer offsets are
// persisted first, so that the file holds the latest commits.
func (s *Store) sendMetadata(bw *bufio.Writer) error {
	if err := s.consumers().PersistOffsets(); err != nil && !errors.Is(err, errs.ErrClosed) {
		s.opts.Logger.Warn("mqlite: serve replica: persist offsets", "err", err)
	}
	m := metaBody{Files: map[string][]byte{}}
	for _, t := range s.topics.Topics() {
		m.Topics = append(m.Topics, metaTopic{Name: t.Name, Queues: t.Config.Queues, System: t.System})
	}
	for _, name := range followedFiles {
		b, err := vfs.ReadFile(s.fs, filepath.Join(s.path(configDir), name))
		if errors.Is(err, vfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mqlite: serve replica: read %s: %w (%w)", name, errs.ErrIO, err)
		}
		m.Files[name] = b
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("mqlite: serve replica: encode metadata: %w", err)
	}
	return writeFrame(bw, frameMeta, 0, s.log.WrotePosition(), body)
}

// applyMetadata registers the primary's topics on the replica and keeps
// its config files for Promote. last holds what was written before, so
// that an unchanged file is not written again.
func (s *Store) applyMetadata(body []byte, last map[string][]byte) error {
	var m metaBody
	if err := json.Unmarshal(body, &m); err != nil {
		return errs.Corrupt("replication stream", 0, "bad metadata: %v", err)
	}
	for _, t := range m.Topics {
		if err := s.followTopic(t); err != nil {
			return err
		}
	}
	for name, b := range m.Files {
		if !followed(name) {
			return errs.Corrupt("replication stream", 0, "metadata names an unexpected file %q", name)
		}
		if bytes.Equal(last[name], b) {
			continue
		}
		if err := vfs.WriteFileAtomic(s.fs, s.path(configDir), name, b); err != nil {
			return fmt.Errorf("mqlite: replicate: write %s: %w (%w)", name, errs.ErrIO, err)
		}
		last[name] = b
	}
	return nil
}

func followed(name string) bool {
	for _, f := range followedFiles {
		if f == name {
			return true
		}
	}
	return false
}

// followTopic creates a topic the primary has, or grows its queue count.
func (s *Store) followTopic(t metaTopic) error {
	have := s.topics.Queues(t.Name)
	var err error
	switch {
	case have >= t.Queues:
		return nil
	case t.System:
		_, err = s.topics.EnsureAtLeast(t.Name, t.Queues)
	case have == 0:
		_, err = s.topics.Ensure(t.Name, topic.Config{Queues: t.Queues}, false)
	default:
		err = s.topics.Update(t.Name, topic.Config{Queues: t.Queues})
	}
	if err != nil {
		return fmt.Errorf("mqlite: replicate: topic %q: %w", t.Name, err)
	}
	s.consumers().TopicsChanged()
	return nil
}
