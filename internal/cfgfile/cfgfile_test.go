package cfgfile

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mqlite/mqlite/internal/errs"
)

const testMagic, testVersion = 0x54534554, 3 // "TEST"

type body struct {
	N int               `json:"n"`
	M map[string]string `json:"m"`
}

func TestFrameDecodesBack(t *testing.T) {
	b, err := Encode(testMagic, testVersion, body{N: 7, M: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var got body
	if err := Decode("f", b, testMagic, testVersion, &got); err != nil {
		t.Fatal(err)
	}
	if got.N != 7 || got.M["a"] != "b" {
		t.Fatalf("decoded %+v", got)
	}
	if string(Frame(testMagic, testVersion, b[HeaderSize:])) != string(b) {
		t.Fatal("Frame of Encode's body differs from Encode")
	}
}

// A null body (a nil map once decoded) and bodies of the wrong type are
// ErrCorrupt naming the file, even though the header is valid.
func TestDecodeRefusesNullAndWrongTypes(t *testing.T) {
	for _, s := range []string{`null`, " null\n", `[]`, `"x"`, `{"n":"1"}`, `{"n":1.5}`, `{"m":[]}`, ``, `{`, `{}x`} {
		m := map[string]int{"keep": 1}
		err := Decode("/c/f.json", Frame(testMagic, testVersion, []byte(s)), testMagic, testVersion, &body{})
		if !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("body %q: %v, want ErrCorrupt", s, err)
		}
		var ce *errs.CorruptError
		if !errors.As(err, &ce) || ce.Path != "/c/f.json" {
			t.Fatalf("body %q: %v does not name the file", s, err)
		}
		if err := Decode("/c/f.json", Frame(testMagic, testVersion, []byte(s)), testMagic, testVersion, &m); err == nil {
			t.Fatalf("body %q decoded into a map: %v", s, m)
		}
	}
}

// FuzzDecode: any bytes decode or fail with ErrCorrupt, never panic.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(testMagic, testVersion, body{N: 1})
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{&body{}, &map[string]int64{}} {
			if err := Decode("f", b, testMagic, testVersion, v); err != nil && !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("Decode: %v", err)
			}
		}
		// The same bytes as a body behind a valid header.
		framed := Frame(testMagic, testVersion, b)
		if binary.LittleEndian.Uint32(framed[8:]) != uint32(len(b)) {
			t.Fatal("length not framed")
		}
		if err := Decode("f", framed, testMagic, testVersion, &body{}); err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("Decode: %v", err)
		}
	})
}
