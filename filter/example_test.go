package filter_test

import (
	"fmt"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/message"
)

func ExampleTag() {
	e, err := filter.Tag("TagA ||TagB")
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Type(), e.String())
	for _, tags := range []string{"TagA", "TagC", ""} {
		m := &message.Message{Topic: "orders", Tags: tags}
		// MatchCode is the ConsumeQueue pre-check; Match the exact test.
		fmt.Printf("%q: code %v, match %v\n", tags, e.MatchCode(message.TagsCode(tags)), e.Match(m))
	}
	_, err = filter.Tag("TagA ||")
	fmt.Println(err)
	// Output:
	// TAG TagA || TagB
	// "TagA": code true, match true
	// "TagC": code false, match false
	// "": code false, match false
	// mqlite/filter: TAG syntax error at 7: empty tag after "||" in "TagA ||"
}

func ExampleSQL() {
	e, err := filter.SQL("TAGS in ('TagA', 'TagB') and amount between 10 and 100 and region <> 'eu'")
	if err != nil {
		panic(err)
	}
	fmt.Println(e.String())
	for _, props := range []map[string]string{
		{"amount": "42", "region": "us"},
		{"amount": "42", "region": "eu"},
		{"amount": "lots", "region": "us"}, // not a number: no match
		{"amount": "42"},                   // region absent: UNKNOWN, no match
	} {
		m := &message.Message{Topic: "orders", Tags: "TagA", Properties: props}
		fmt.Println(props, e.Match(m))
	}
	_, err = filter.SQL("amount = AND region")
	fmt.Println(err)
	// Output:
	// TAGS IN ('TagA', 'TagB') AND amount BETWEEN 10 AND 100 AND region <> 'eu'
	// map[amount:42 region:us] true
	// map[amount:42 region:eu] false
	// map[amount:lots region:us] false
	// map[amount:42] false
	// mqlite/filter: SQL92 syntax error at 9: expected a property or a literal after '=', found 'AND' in "amount = AND region"
}
