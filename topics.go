package mqlite

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// TopicConfig is a topic's configuration: its queue count.
type TopicConfig = topic.Config

// TopicInfo describes a registered topic.
type TopicInfo = topic.Info

// CreateTopic registers a topic with c.Queues queues (1..16384; a one-queue
// topic gives global order). It fails with ErrTopicExists if the topic is
// there, and ErrInvalidTopic for an illegal name or a system topic's.
func (s *Store) CreateTopic(name string, c TopicConfig) error {
	return s.changeTopics("create topic", func() error { return s.topics.Create(name, c) })
}

// UpdateTopic changes a topic's configuration. The queue count may grow,
// never shrink (ErrInvalidArgument): messages in dropped queues would be
// stranded.
func (s *Store) UpdateTopic(name string, c TopicConfig) error {
	return s.changeTopics("update topic", func() error { return s.topics.Update(name, c) })
}

// changeTopics runs change on the writable store's topic registry and
// tells the consumers (a subscription may be waiting for the topic).
func (s *Store) changeTopics(op string, change func() error) error {
	if err := s.writable(op); err != nil {
		return err
	}
	if err := change(); err != nil {
		return err
	}
	s.consumers().TopicsChanged()
	return nil
}

// Topics lists the registered topics, system topics included, by name.
func (s *Store) Topics() []TopicInfo { return s.topics.Topics() }

// Topic returns a topic's configuration, or ErrTopicNotFound.
func (s *Store) Topic(name string) (TopicConfig, error) { return s.topics.Get(name) }

// queueCount returns the queue count of a topic a user sends to, creating
// it with auto queues (0: Options.DefaultTopicQueues) when auto-creation
// is on. System topics are refused.
func (s *Store) queueCount(name string, auto int) (int, error) {
	if n, system := s.topics.Lookup(name); n > 0 && !system {
		return n, nil // a user topic: only users create those (ValidateName)
	}
	if topic.IsSystem(name) {
		return 0, fmt.Errorf("%w: %q is reserved for the store", message.ErrInvalidTopic, name)
	}
	if s.opts.DisableAutoCreateTopics {
		return 0, fmt.Errorf("mqlite: send to %q: %w (auto-create is off)", name, errs.ErrTopicNotFound)
	}
	if auto <= 0 {
		auto = s.opts.DefaultTopicQueues
	}
	n, err := s.topics.Ensure(name, topic.Config{Queues: auto}, false)
	if err == nil {
		s.consumers().TopicsChanged() // a consumer may have subscribed before
	}
	return n, err
}

// sysQueueCount is queueCount for the store's own topics.
func (s *Store) sysQueueCount(name string, queues int) (int, error) {
	return s.topics.Ensure(name, topic.Config{Queues: queues}, true)
}

// checkSysQueue checks a put to queue of one of the store's own topics.
func (s *Store) checkSysQueue(name string, queue int) error {
	n := s.topics.Queues(name)
	if n == 0 {
		return fmt.Errorf("mqlite: system topic %q: %w", name, errs.ErrTopicNotFound)
	}
	if queue < 0 || queue >= n {
		return fmt.Errorf("mqlite: queue id %d outside [0, %d) of topic %q: %w", queue, n, name, errs.ErrInvalidArgument)
	}
	return nil
}

// checkQueue resolves the topic of m for a put to queue.
func (s *Store) checkQueue(m *Message, queue int, sys bool) error {
	var n int
	var err error
	if sys {
		n = s.topics.Queues(m.Topic)
		if n == 0 {
			err = fmt.Errorf("mqlite: system topic %q: %w", m.Topic, errs.ErrTopicNotFound)
		}
	} else {
		n, err = s.queueCount(m.Topic, 0)
	}
	if err != nil {
		return err
	}
	if queue < 0 || queue >= n {
		return fmt.Errorf("mqlite: queue id %d outside [0, %d) of topic %q: %w", queue, n, m.Topic, errs.ErrInvalidArgument)
	}
	return nil
}
