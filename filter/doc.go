// Package filter owns subscription expressions: the tag and SQL92 filters a
// consumer group subscribes with, compiled once and evaluated store-side
// against every candidate message. It is a leaf package: it reads a
// message.Message and a tags code and never touches the log.
//
// # Two stages
//
// An Expression is checked twice, as in RocketMQ:
//
//  1. MatchCode sees only the 32-bit tags code the ConsumeQueue stores
//     (message.TagsCode of the message's tags). It is cheap and may give
//     false positives (hash collisions, or expressions it cannot decide
//     from a code), never false negatives, so a false result lets the
//     reader skip the entry without reading the CommitLog. A tag expression
//     checks the codes of its tags; an SQL92 expression rejects a code only
//     when it requires TAGS to equal one of a fixed set of strings (TAGS =
//     'a' AND ..., TAGS IN ('a', 'b')), and otherwise accepts every code.
//  2. Match is the exact answer on the decoded message.
//
// # Tag expressions
//
// Tag("TagA || TagB") matches a message whose Tags string equals one of the
// listed tags exactly. "" and "*" match every message, with or without tags.
// Tags are trimmed of white space; an empty element ("A ||"), a "*" inside a
// list, control characters and invalid UTF-8 are errors.
//
// # SQL92 expressions
//
// SQL compiles RocketMQ's SQL92 subset. Variables are message properties:
// the user properties plus the reserved ones backed by Message fields —
// TAGS, KEYS (space-separated), UNIQ_KEY, SHARDING_KEY, DELAY (level) and
// TIMER_DELIVER_MS. An empty reserved field (no tags, DelayLevel 0, ...)
// is an absent property; a user property set to "" is present.
//
//	expr      = and { OR and }
//	and       = not { AND not }
//	not       = NOT not | predicate
//	predicate = "(" expr ")" | TRUE | FALSE
//	          | operand ( "=" | "<>" | "!=" | "<" | "<=" | ">" | ">=" ) operand
//	          | operand [NOT] BETWEEN operand AND operand
//	          | operand [NOT] IN "(" string { "," string } ")"
//	          | operand [NOT] ( CONTAINS | STARTSWITH | ENDSWITH ) string
//	          | operand IS [NOT] NULL
//	operand   = identifier | [ "+" | "-" ] number | string | TRUE | FALSE | NULL
//
// Keywords are case-insensitive. Identifiers start with a letter, '_' or
// '$' and continue with letters, digits, '_', '$' and '.'. Integers
// (optionally suffixed L) are int64, numbers with a fraction or exponent
// are float64; strings are single-quoted, a quote inside written twice.
//
// Types are checked at compile time: <, <=, >, >= and BETWEEN take numbers;
// = and <> compare a property with a number, string or boolean literal (the
// literal chooses the type), two properties as strings, and two literals
// only of the same type; IN, CONTAINS, STARTSWITH and ENDSWITH take string
// literals. BETWEEN bounds may not be NULL, and literal bounds must be in
// order, as in RocketMQ.
//
// # Evaluation
//
// Property values are strings. Compared with a number they are parsed as a
// decimal int64 or float64 (int against int is exact, anything else is
// compared as float64); compared with TRUE or FALSE they must spell "true"
// or "false" in any case. Logic is three-valued: a comparison with an
// absent property or the NULL literal is UNKNOWN, and so is a comparison
// whose property value does not convert (a = 'abc' in a > 5). NOT UNKNOWN
// is UNKNOWN; AND and OR follow SQL; a message matches only when the whole
// expression is TRUE. So with a = 'abc' neither a > 5 nor NOT (a > 5)
// matches. IS NULL and IS NOT NULL are never UNKNOWN.
//
// # Caveats
//
// Differences from RocketMQ, all deliberate: NOT has SQL precedence (below
// comparisons, so NOT a = 1 is NOT (a = 1); RocketMQ binds NOT to the
// operand); a failed number conversion is UNKNOWN rather than FALSE, so
// wrapping it in NOT does not turn it into a match; != is accepted as <>;
// identifiers may contain '.'; SQL comments are not accepted; a bare
// property is not a condition; and MaxExpressionLen, MaxDepth and
// MaxInList bound what compiles. String returns a normalised text
// (upper-case keywords, single spaces, only the parentheses precedence
// needs) that compiles to an equivalent expression.
package filter
