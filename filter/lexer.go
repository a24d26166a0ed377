package filter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tInt    // integer literal, text without the L suffix
	tFloat  // decimal or exponent literal
	tString // quoted literal, str holds the decoded value
	tLParen
	tRParen
	tComma
	tPlus
	tMinus
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	// Keywords.
	tAnd
	tOr
	tNot
	tBetween
	tIn
	tIs
	tNull
	tTrue
	tFalse
	tContains
	tStartsWith
	tEndsWith
)

// keywords maps upper-case keyword spellings to their kinds.
var keywords = map[string]tokKind{
	"AND": tAnd, "OR": tOr, "NOT": tNot, "BETWEEN": tBetween, "IN": tIn,
	"IS": tIs, "NULL": tNull, "TRUE": tTrue, "FALSE": tFalse,
	"CONTAINS": tContains, "STARTSWITH": tStartsWith, "ENDSWITH": tEndsWith,
}

// maxKeywordLen is the length of the longest keyword.
const maxKeywordLen = len("STARTSWITH")

// token is one lexeme. text is the source spelling (the digits for
// numbers, the decoded value for strings).
type token struct {
	kind tokKind
	pos  int
	text string
}

// describe names a token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tIdent:
		return fmt.Sprintf("property %s", t.text)
	case tInt, tFloat:
		return fmt.Sprintf("number %s", t.text)
	case tString:
		return fmt.Sprintf("string %s", quote(t.text))
	}
	return fmt.Sprintf("'%s'", t.text)
}

// lex splits src into tokens, ending with tEOF.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; ; {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tEOF, pos: i}), nil
		}
		t, n, err := lexOne(src, i)
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		i += n
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lexOne reads the token at src[i:] and returns it with its length.
func lexOne(src string, i int) (token, int, error) {
	c := src[i]
	two := ""
	if i+1 < len(src) {
		two = src[i : i+2]
	}
	switch {
	case two == "<>" || two == "!=":
		return token{kind: tNe, pos: i, text: two}, 2, nil
	case two == "<=":
		return token{kind: tLe, pos: i, text: two}, 2, nil
	case two == ">=":
		return token{kind: tGe, pos: i, text: two}, 2, nil
	case c == '\'':
		return lexString(src, i)
	case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
		return lexNumber(src, i)
	}
	if k, ok := punct[c]; ok {
		return token{kind: k, pos: i, text: src[i : i+1]}, 1, nil
	}
	r, size := utf8.DecodeRuneInString(src[i:])
	switch {
	case r == utf8.RuneError && size == 1:
		return token{}, 0, sqlError(src, i, "invalid UTF-8")
	case isIdentStart(r):
		return lexIdent(src, i)
	case r == '!':
		return token{}, 0, sqlError(src, i, "unexpected '!' (did you mean '<>' or NOT?)")
	}
	return token{}, 0, sqlError(src, i, "unexpected character %q", r)
}

// punct maps single-byte punctuation to its kind.
var punct = map[byte]tokKind{
	'(': tLParen, ')': tRParen, ',': tComma, '+': tPlus, '-': tMinus,
	'=': tEq, '<': tLt, '>': tGt,
}

func isIdentStart(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) }

func isIdentPart(r rune) bool { return isIdentStart(r) || r == '.' || unicode.IsDigit(r) }

func lexIdent(src string, i int) (token, int, error) {
	j := i
	for j < len(src) {
		r, size := utf8.DecodeRuneInString(src[j:])
		if r == utf8.RuneError && size == 1 {
			return token{}, 0, sqlError(src, j, "invalid UTF-8")
		}
		if !isIdentPart(r) {
			break
		}
		j += size
	}
	word := src[i:j]
	if len(word) <= maxKeywordLen {
		if k, ok := keywords[strings.ToUpper(word)]; ok {
			return token{kind: k, pos: i, text: strings.ToUpper(word)}, j - i, nil
		}
	}
	return token{kind: tIdent, pos: i, text: word}, j - i, nil
}

// lexString reads a quoted literal, in which a doubled quote stands for
// one quote.
func lexString(src string, i int) (token, int, error) {
	var b strings.Builder
	escaped := false
	seg := i + 1 // start of the bytes not yet copied to b
	for j := i + 1; j < len(src); j++ {
		if src[j] != '\'' {
			continue
		}
		if j+1 < len(src) && src[j+1] == '\'' {
			b.WriteString(src[seg : j+1]) // up to and including one quote
			escaped = true
			j++
			seg = j + 1
			continue
		}
		text := src[seg:j]
		if escaped {
			b.WriteString(text)
			text = b.String()
		}
		return token{kind: tString, pos: i, text: text}, j + 1 - i, nil
	}
	return token{}, 0, sqlError(src, i, "unterminated string")
}

// lexNumber reads digits [. digits] [E [+-] digits] [L], or . digits ...
// The text excludes an L suffix; the parser converts it with its sign.
func lexNumber(src string, i int) (token, int, error) {
	j := i
	digits := func() {
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	digits()
	kind := tInt
	if j < len(src) && src[j] == '.' {
		kind = tFloat
		j++
		digits()
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k >= len(src) || !isDigit(src[k]) {
			return token{}, 0, sqlError(src, i, "malformed number %q: exponent without digits", src[i:k])
		}
		kind = tFloat
		j = k
		digits()
	}
	text := src[i:j]
	if kind == tInt && j < len(src) && (src[j] == 'L' || src[j] == 'l') {
		j++
	}
	if j < len(src) {
		if r, _ := utf8.DecodeRuneInString(src[j:]); isIdentPart(r) {
			return token{}, 0, sqlError(src, i, "malformed number %q", src[i:j+1])
		}
	}
	return token{kind: kind, pos: i, text: text}, j - i, nil
}

// quote renders s as a string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
