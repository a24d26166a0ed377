package message

import (
	"fmt"
	"strings"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
)

// Limits, as RocketMQ sets them.
const (
	MaxTopicLen      = 127     // user topics
	MaxSysTopicLen   = 255     // system topics (%RETRY%group and the like)
	MaxPropsLen      = 32767   // encoded properties
	DefaultMaxBody   = 4 << 20 // 4 MiB
	MaxDeliverAhead  = 3 * 24 * time.Hour
	maxDelayLevelCap = 64
)

// Validation errors. Each matches ErrInvalidArgument (or ErrMessageTooLarge).
var (
	ErrInvalidTopic    = fmt.Errorf("%w: invalid topic", errs.ErrInvalidArgument)
	ErrEmptyBody       = fmt.Errorf("%w: empty body", errs.ErrInvalidArgument)
	ErrInvalidTags     = fmt.Errorf("%w: invalid tags", errs.ErrInvalidArgument)
	ErrInvalidKey      = fmt.Errorf("%w: invalid key", errs.ErrInvalidArgument)
	ErrInvalidProperty = fmt.Errorf("%w: invalid property", errs.ErrInvalidArgument)
	ErrInvalidDelay    = fmt.Errorf("%w: invalid delay", errs.ErrInvalidArgument)
	ErrNilMessage      = fmt.Errorf("%w: nil message", errs.ErrInvalidArgument)
)

// ValidateTopic checks a topic name: 1..maxLen bytes of [A-Za-z0-9_-|%].
func ValidateTopic(topic string, maxLen int) error {
	if topic == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	}
	if len(topic) > maxLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidTopic, len(topic), maxLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '|' || c == '%') {
			return fmt.Errorf("%w: %q has illegal character %q", ErrInvalidTopic, topic, c)
		}
	}
	return nil
}

// hasControl reports ASCII control characters (which also covers the
// property separators); a tag filter could never select such tags.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

func hasSep(s string) bool { return strings.ContainsAny(s, "\x01\x02") }

// Validate checks a message before it is stored: topic, body, tags, keys,
// properties and delay. maxBody <= 0 means DefaultMaxBody. maxTopic is the
// topic length limit (MaxTopicLen for users). now is the store's clock, for
// the deliver-at check. uniqLen is the length of the key the store adds.
func Validate(m *Message, maxBody, maxTopic, uniqLen int, now time.Time) error {
	if m == nil {
		return ErrNilMessage
	}
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	if err := ValidateTopic(m.Topic, maxTopic); err != nil {
		return err
	}
	if len(m.Body) == 0 {
		return ErrEmptyBody
	}
	if len(m.Body) > maxBody {
		return fmt.Errorf("%w: body of %d bytes, the limit is %d", errs.ErrMessageTooLarge, len(m.Body), maxBody)
	}
	if hasControl(m.Tags) || strings.Contains(m.Tags, "||") {
		return fmt.Errorf("%w: %q (no control characters, no \"||\")", ErrInvalidTags, m.Tags)
	}
	for _, k := range m.Keys {
		if k == "" || strings.ContainsAny(k, " \x01\x02") {
			return fmt.Errorf("%w: %q (keys are non-empty and have no spaces)", ErrInvalidKey, k)
		}
	}
	if hasSep(m.ShardingKey) || hasSep(m.UniqKey) || hasSep(m.DedupID) {
		return fmt.Errorf("%w: control characters in sharding, unique or dedup key", ErrInvalidKey)
	}
	if len(m.Properties) > 0 { // ranging over even an empty map costs an iterator
		for k, v := range m.Properties {
			if err := checkProperty(k, v); err != nil {
				return err
			}
		}
	}
	if n := propsSize(m, uniqLen); n > MaxPropsLen {
		return fmt.Errorf("%w: properties of %d bytes, the limit is %d", ErrInvalidProperty, n, MaxPropsLen)
	}
	if m.DelayLevel < 0 || m.DelayLevel > maxDelayLevelCap {
		return fmt.Errorf("%w: level %d", ErrInvalidDelay, m.DelayLevel)
	}
	if !m.DeliverAt.IsZero() {
		if m.DelayLevel > 0 {
			return fmt.Errorf("%w: both DelayLevel and DeliverAt set", ErrInvalidDelay)
		}
		if m.DeliverAt.After(now.Add(MaxDeliverAhead)) {
			return fmt.Errorf("%w: deliver-at %s is more than %s ahead", ErrInvalidDelay, m.DeliverAt.Format(time.RFC3339), MaxDeliverAhead)
		}
	}
	return nil
}

// checkProperty says what is wrong with a user property, if anything.
func checkProperty(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty name", ErrInvalidProperty)
	case isReserved(k):
		return fmt.Errorf("%w: %q is a reserved name, set through its Message field (Tags, Keys, UniqKey, ShardingKey, DedupID, DelayLevel, DeliverAt)",
			ErrInvalidProperty, k)
	case hasSep(k):
		return fmt.Errorf("%w: name %q has a control character", ErrInvalidProperty, k)
	case hasSep(v):
		return fmt.Errorf("%w: the value of %q has a control character", ErrInvalidProperty, k)
	}
	return nil
}

func isReserved(name string) bool {
	switch name {
	case PropTags, PropKeys, PropUniqKey, PropShardingKey, PropDedupID, PropDelay, PropDeliverAt, PropRealTopic, PropRealQueueID:
		return true
	}
	return false
}
