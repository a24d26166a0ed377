package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := &Command{Code: 10, Language: "GO", Version: 317, Opaque: 42, Flag: FlagOneway,
		Remark: "r", ExtFields: map[string]string{"topic": "T"}, Body: []byte("hello")}
	frame, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ReadFrame(bytes.NewReader(frame), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if out.Code != 10 || out.Opaque != 42 || !out.IsOneway() || out.IsResponse() ||
		out.Field("topic") != "T" || string(out.Body) != "hello" || out.Remark != "r" {
		t.Fatalf("round trip: %+v", out)
	}
}

func TestReadFrameLimits(t *testing.T) {
	var big [4]byte
	binary.BigEndian.PutUint32(big[:], 1<<30)
	if _, err := ReadFrame(bytes.NewReader(big[:]), 1024); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	var tiny [4]byte
	binary.BigEndian.PutUint32(tiny[:], 2)
	if _, err := ReadFrame(bytes.NewReader(tiny[:]), 1024); !errors.Is(err, ErrMalformed) {
		t.Fatalf("tiny: %v", err)
	}
	var short [8]byte
	binary.BigEndian.PutUint32(short[:], 100)
	if _, err := ReadFrame(bytes.NewReader(short[:]), 1024); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string]struct {
		frame []byte
		want  error
	}{
		"short":         {[]byte{0, 0}, ErrMalformed},
		"header past":   {[]byte{0, 0, 0, 9, '{', '}'}, ErrMalformed},
		"binary header": {[]byte{1, 0, 0, 0}, ErrUnsupportedCodec},
		"bad json":      {[]byte{0, 0, 0, 2, '{', 'x'}, ErrMalformed},
		"wrong types":   {append([]byte{0, 0, 0, 12}, []byte(`{"code":"x"}`)...), ErrMalformed},
	}
	for name, c := range cases {
		if _, err := Decode(c.frame); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	good, _ := Encode(&Command{Code: 11, Opaque: 1, ExtFields: map[string]string{"a": "b"}, Body: []byte{1, 2}})
	f.Add(good)
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 6, 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := ReadFrame(bytes.NewReader(data), 1<<16)
		if err != nil {
			return
		}
		c, err := Decode(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupportedCodec) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		raw2, err := ReadFrame(bytes.NewReader(again), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(raw2)
		if err != nil || c2.Code != c.Code || c2.Opaque != c.Opaque || !bytes.Equal(c2.Body, c.Body) {
			t.Fatalf("re-encode differs: %+v %+v %v", c, c2, err)
		}
	})
}
