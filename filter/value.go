package filter

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/mqlite/mqlite/message"
)

// valKind is the type of a runtime value.
type valKind uint8

const (
	vNull valKind = iota // absent property or the NULL literal
	vString
	vInt
	vFloat
	vBool
)

// value is a literal or a property value. It is passed by value so that
// evaluation does not allocate.
type value struct {
	kind valKind
	b    bool
	i    int64
	f    float64
	s    string
}

// propID says where a property's value comes from. Reserved properties
// are backed by Message fields; the rest are looked up in Properties.
type propID uint8

const (
	propNone propID = iota // the operand is a literal
	propUser
	propTags
	propKeys
	propUniqKey
	propShardingKey
	propDelay
	propDeliverAt
)

func propIDOf(name string) propID {
	switch name {
	case message.PropTags:
		return propTags
	case message.PropKeys:
		return propKeys
	case message.PropUniqKey:
		return propUniqKey
	case message.PropShardingKey:
		return propShardingKey
	case message.PropDelay:
		return propDelay
	case message.PropDeliverAt:
		return propDeliverAt
	}
	return propUser
}

// operand is a property reference or a literal.
type operand struct {
	prop propID // propNone for a literal
	name string // property name
	lit  value  // the literal, when prop == propNone
	pos  int    // source position, for errors
}

func (o *operand) isProp() bool { return o.prop != propNone }

// get returns the operand's value for m. Empty reserved fields are absent.
func (o *operand) get(m *message.Message) value {
	switch o.prop {
	case propNone:
		return o.lit
	case propUser:
		if s, ok := m.Properties[o.name]; ok {
			return value{kind: vString, s: s}
		}
		return value{}
	case propTags:
		return str(m.Tags)
	case propKeys:
		switch len(m.Keys) {
		case 0:
			return value{}
		case 1:
			return str(m.Keys[0])
		}
		return str(strings.Join(m.Keys, " "))
	case propUniqKey:
		return str(m.UniqKey)
	case propShardingKey:
		return str(m.ShardingKey)
	case propDelay:
		if m.DelayLevel == 0 {
			return value{}
		}
		return value{kind: vInt, i: int64(m.DelayLevel)}
	case propDeliverAt:
		if m.DeliverAt.IsZero() {
			return value{}
		}
		return value{kind: vInt, i: m.DeliverAt.UnixMilli()}
	}
	return value{}
}

// str is a reserved field's value: empty means absent.
func str(s string) value {
	if s == "" {
		return value{}
	}
	return value{kind: vString, s: s}
}

// toNumber converts v to an int or float value; strings are parsed.
func toNumber(v value) (value, bool) {
	switch v.kind {
	case vInt, vFloat:
		return v, true
	case vString:
		return parseNumber(v.s)
	}
	return value{}, false
}

// parseNumber parses a decimal number: [+-] digits [. digits] [e [+-]
// digits], with digits on at least one side of the point. Integers that
// overflow int64 become floats; out-of-range floats are not numbers.
// The syntax is checked first so that the common failure does not
// allocate a *strconv.NumError.
func parseNumber(s string) (value, bool) {
	i, n := 0, len(s)
	if i < n && (s[i] == '+' || s[i] == '-') {
		i++
	}
	mant := 0
	for ; i < n && isDigit(s[i]); i++ {
		mant++
	}
	isInt := true
	if i < n && s[i] == '.' {
		isInt = false
		for i++; i < n && isDigit(s[i]); i++ {
			mant++
		}
	}
	if mant == 0 {
		return value{}, false
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		isInt = false
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < n && isDigit(s[i]); i++ {
			exp++
		}
		if exp == 0 {
			return value{}, false
		}
	}
	if i != n {
		return value{}, false
	}
	if isInt {
		if x, err := strconv.ParseInt(s, 10, 64); err == nil {
			return value{kind: vInt, i: x}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return value{}, false
	}
	return value{kind: vFloat, f: f}, true
}

// compareNumbers orders two numeric values: exactly when both are ints,
// as float64 otherwise.
func compareNumbers(a, b value) int {
	if a.kind == vInt && b.kind == vInt {
		return cmp.Compare(a.i, b.i)
	}
	return cmp.Compare(a.float(), b.float())
}

func (v value) float() float64 {
	if v.kind == vInt {
		return float64(v.i)
	}
	return v.f
}

// toString converts v for a string comparison; numbers (from the numeric
// reserved properties) are formatted.
func toString(v value) (string, bool) {
	switch v.kind {
	case vString:
		return v.s, true
	case vInt:
		return strconv.FormatInt(v.i, 10), true
	case vFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64), true
	}
	return "", false
}

// toBool converts v for a boolean comparison: "true" and "false" in any
// case; anything else is not a boolean.
func toBool(v value) (bool, bool) {
	switch {
	case v.kind == vBool:
		return v.b, true
	case v.kind != vString:
		return false, false
	case strings.EqualFold(v.s, "true"):
		return true, true
	case strings.EqualFold(v.s, "false"):
		return false, true
	}
	return false, false
}
