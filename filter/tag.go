package filter

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mqlite/mqlite/message"
)

// tagSeparator separates the tags of a tag expression.
const tagSeparator = "||"

// smallSet is the list size up to which a linear scan beats a map.
const smallSet = 8

// tagExpr is a compiled tag expression. all is set for "*" (and "").
type tagExpr struct {
	all   bool
	tags  []string // distinct, in source order
	codes []uint32 // message.TagsCode of each tag (may repeat on collision)

	// Maps used instead of the slices for long lists.
	tagSet  map[string]struct{}
	codeSet map[uint32]struct{}
}

var allExpr = &tagExpr{all: true}

// All returns the expression that matches every message, the same as
// Tag("*").
func All() Expression { return allExpr }

// Tag compiles a tag expression: "" or "*" for every message, otherwise
// tags separated by "||" ("TagA || TagB"), each trimmed of white space.
// An empty element, a "*" inside a list, control characters or invalid
// UTF-8 in a tag, or a source longer than MaxExpressionLen is a
// *SyntaxError matching ErrInvalidExpression.
func Tag(expr string) (Expression, error) {
	if len(expr) > MaxExpressionLen {
		return nil, tagError(expr, MaxExpressionLen, "expression is %d bytes, the limit is %d", len(expr), MaxExpressionLen)
	}
	if t := strings.TrimSpace(expr); t == "" || t == "*" {
		return allExpr, nil
	}
	e := &tagExpr{}
	for pos := 0; ; {
		elem, rest, more := strings.Cut(expr[pos:], tagSeparator)
		tag := strings.TrimSpace(elem)
		start := pos + strings.Index(elem, tag) // position of the trimmed tag
		if tag == "" {
			if more {
				return nil, tagError(expr, pos+len(elem), "empty tag before %q", tagSeparator)
			}
			return nil, tagError(expr, pos+len(elem), "empty tag after %q", tagSeparator)
		}
		if err := checkTag(expr, start, tag); err != nil {
			return nil, err
		}
		if !slices.Contains(e.tags, tag) {
			e.tags = append(e.tags, tag)
			e.codes = append(e.codes, message.TagsCode(tag))
		}
		if !more {
			break
		}
		pos = len(expr) - len(rest)
	}
	if len(e.tags) > smallSet {
		e.tagSet = make(map[string]struct{}, len(e.tags))
		e.codeSet = make(map[uint32]struct{}, len(e.codes))
		for i, t := range e.tags {
			e.tagSet[t] = struct{}{}
			e.codeSet[e.codes[i]] = struct{}{}
		}
	}
	return e, nil
}

// checkTag rejects what can never be a stored tag or is surely a mistake.
// start is the tag's byte offset in src, for the error position.
func checkTag(src string, start int, tag string) error {
	if tag == "*" {
		return tagError(src, start, "'*' must stand alone")
	}
	for i, r := range tag {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(tag[i:]); size == 1 {
				return tagError(src, start+i, "invalid UTF-8 in tag %q", tag)
			}
		}
		if unicode.IsControl(r) {
			return tagError(src, start+i, "control character %q in tag %q", r, tag)
		}
	}
	return nil
}

// MatchCode reports whether tagsCode is the code of one of the tags; "*"
// matches every code, including 0 (no tags).
func (e *tagExpr) MatchCode(tagsCode uint32) bool {
	switch {
	case e.all:
		return true
	case e.codeSet != nil:
		_, ok := e.codeSet[tagsCode]
		return ok
	}
	return slices.Contains(e.codes, tagsCode)
}

// Match reports whether the message's tags equal one of the tags.
func (e *tagExpr) Match(m *message.Message) bool {
	switch {
	case e.all:
		return true
	case m == nil || m.Tags == "":
		return false
	case e.tagSet != nil:
		_, ok := e.tagSet[m.Tags]
		return ok
	}
	return slices.Contains(e.tags, m.Tags)
}

// Type returns TypeTag.
func (e *tagExpr) Type() string { return TypeTag }

// String returns "*" or the distinct tags joined by " || ".
func (e *tagExpr) String() string {
	if e.all {
		return "*"
	}
	return strings.Join(e.tags, " "+tagSeparator+" ")
}
