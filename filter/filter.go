package filter

import "github.com/mqlite/mqlite/message"

// Expression types, as Expression.Type reports them.
const (
	TypeTag   = "TAG"
	TypeSQL92 = "SQL92"
)

// Expression is a compiled subscription filter. It is immutable and safe
// for concurrent use.
type Expression interface {
	// MatchCode is the fast pre-check on the tags hash stored in the
	// ConsumeQueue (message.TagsCode(tags)). It may give false positives,
	// never false negatives.
	MatchCode(tagsCode uint32) bool
	// Match is the exact check on the message (tags and properties). A nil
	// message is treated as one with no tags and no properties.
	Match(m *message.Message) bool
	// Type is TypeTag or TypeSQL92.
	Type() string
	// String returns the normalised source text.
	String() string
}

// emptyMessage stands in for a nil *message.Message. It is never written.
var emptyMessage message.Message
