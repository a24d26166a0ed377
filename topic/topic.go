// Package topic owns the topic registry: which topics exist and how many
// queues each has, the naming rules, and the system topics that only the
// store itself may write. The registry is persisted in the store's config/
// directory and reloaded on open.
package topic

import (
	"fmt"
	"strings"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// System topics, with RocketMQ's names.
const (
	// Schedule holds delayed messages, one queue per delay level.
	Schedule = "SCHEDULE_TOPIC_XXXX"
	// Half holds transactional half messages (queue 0).
	Half = "RMQ_SYS_TRANS_HALF_TOPIC"
	// OpHalf holds the commit/rollback decisions for half messages.
	OpHalf = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// CheckMax parks half messages that ran out of check-backs.
	CheckMax = "TRANS_CHECK_MAX_TIME_TOPIC"
	// Timer holds messages with a deliver-at time.
	Timer = "rmq_sys_wheel_timer"

	// RetryPrefix starts a consumer group's retry topic.
	RetryPrefix = "%RETRY%"
	// DLQPrefix starts a consumer group's dead-letter topic.
	DLQPrefix = "%DLQ%"

	// MaxQueues bounds the queue count of a topic.
	MaxQueues = 1 << 14
	// DefaultQueues is the queue count of an auto-created topic.
	DefaultQueues = 4
	// MaxGroupLen bounds a consumer group name.
	MaxGroupLen = 120
)

// reserved are names users may neither create nor send to.
var reserved = map[string]bool{
	"TBW102": true, Schedule: true, "BenchmarkTest": true, Half: true, "RMQ_SYS_TRACE_TOPIC": true,
	OpHalf: true, CheckMax: true, "SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true, "CHECKPOINT_TOPIC": true,
}

// IsSystem reports whether name is reserved for the store: RocketMQ's
// system topics, anything starting with "rmq_sys_", and retry and
// dead-letter topics.
func IsSystem(name string) bool {
	return reserved[name] || strings.HasPrefix(name, "rmq_sys_") ||
		strings.HasPrefix(name, RetryPrefix) || strings.HasPrefix(name, DLQPrefix)
}

// RetryTopic is the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryPrefix + group }

// DLQTopic is the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQPrefix + group }

// ValidateName checks a user topic name: 1..127 bytes of [A-Za-z0-9_-|%],
// not a system topic. Errors match ErrInvalidTopic (and ErrInvalidArgument).
func ValidateName(name string) error {
	if err := message.ValidateTopic(name, message.MaxTopicLen); err != nil {
		return err
	}
	if IsSystem(name) {
		return fmt.Errorf("%w: %q is reserved for the store", message.ErrInvalidTopic, name)
	}
	return nil
}

// ValidateGroup checks a consumer group name: 1..120 bytes of
// [A-Za-z0-9_-|%]. Errors match ErrInvalidArgument.
func ValidateGroup(group string) error {
	if err := message.ValidateTopic(group, MaxGroupLen); err != nil {
		return fmt.Errorf("mqlite: group name: %w", err)
	}
	return nil
}

// Config is a topic's configuration.
type Config struct {
	// Queues is the number of queues, 1..MaxQueues. A one-queue topic
	// gives global order.
	Queues int
	// RetentionAge, if set, is the topic's own retention: its messages
	// older than this are no longer delivered or counted in lag, though
	// the store's segments (shared by every topic) are deleted only once
	// every topic in them allows it. Kafka's retention.ms. 0: the store's
	// Retention only.
	RetentionAge time.Duration
	// RetentionBytes, if set, bounds each queue of the topic: its oldest
	// messages beyond this many stored bytes are no longer delivered.
	// Kafka's retention.bytes, which is per partition too. 0: no bound.
	RetentionBytes int64
}

func (c Config) validate() error {
	if c.Queues < 1 || c.Queues > MaxQueues {
		return fmt.Errorf("mqlite: topic with %d queues, want 1..%d: %w", c.Queues, MaxQueues, errs.ErrInvalidArgument)
	}
	if c.RetentionAge < 0 || (c.RetentionAge > 0 && c.RetentionAge < time.Millisecond) || c.RetentionBytes < 0 {
		return fmt.Errorf("mqlite: topic retention %v / %d bytes, want 0 or at least 1 ms / 0 or positive: %w",
			c.RetentionAge, c.RetentionBytes, errs.ErrInvalidArgument)
	}
	return nil
}

// ValidateSysName checks the characters and length (up to 255) of a name
// the store uses for itself.
func ValidateSysName(name string) error {
	return message.ValidateTopic(name, message.MaxSysTopicLen)
}
