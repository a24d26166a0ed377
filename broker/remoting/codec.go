// Package remoting owns Apache RocketMQ's remoting frame as the official
// clients speak it: a command with a JSON header and an opaque body.
//
// # Frame
//
//	offset  size  field
//	0       4     total length L, big endian: the bytes that follow
//	4       1     serialization type (0 = JSON; 1, RocketMQ's binary
//	              header, is refused with ErrUnsupportedCodec)
//	5       3     header length H, big endian
//	8       H     header: JSON object code, language, version, opaque,
//	              flag, remark, extFields (string to string)
//	8+H     L-4-H body
//
// Flag bit 0 marks a response, bit 1 a oneway request (no response).
// A response carries the opaque of its request.
//
// Every length is checked against the frame and against MaxFrame before
// anything is allocated: a malformed frame is an error wrapping
// ErrMalformed (or ErrFrameTooLarge), never a panic.
package remoting

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Flag bits of a command.
const (
	FlagResponse = 1 << 0
	FlagOneway   = 1 << 1
)

// DefaultMaxFrame is the frame size limit RocketMQ's remoting uses by
// default (com.rocketmq.remoting.frameMaxLength), 16 MiB.
const DefaultMaxFrame = 16 << 20

// Serialization types of the header.
const (
	CodecJSON     = 0
	CodecRocketMQ = 1
)

// Errors.
var (
	// ErrMalformed: a frame whose lengths or header cannot be read.
	ErrMalformed = errors.New("mqlite/broker/remoting: malformed frame")
	// ErrFrameTooLarge: a frame longer than the limit.
	ErrFrameTooLarge = errors.New("mqlite/broker/remoting: frame too large")
	// ErrUnsupportedCodec: a header serialized with a type other than JSON.
	ErrUnsupportedCodec = errors.New("mqlite/broker/remoting: unsupported header serialization")
)

// Command is one request or response.
type Command struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Body      []byte            `json:"-"`
}

// IsResponse reports whether c is a response.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that expects no response.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Field returns extension field k ("" when absent).
func (c *Command) Field(k string) string { return c.ExtFields[k] }

// NewResponse returns a response to req with code and remark.
func NewResponse(req *Command, code int, remark string) *Command {
	return &Command{
		Code:      code,
		Language:  "GO",
		Version:   req.Version,
		Opaque:    req.Opaque,
		Flag:      FlagResponse,
		Remark:    remark,
		ExtFields: map[string]string{},
	}
}

// Encode returns the frame of c, length prefix included.
func Encode(c *Command) ([]byte, error) {
	hdr, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("mqlite/broker/remoting: encode header: %w", err)
	}
	if len(hdr) > 0xFFFFFF {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrFrameTooLarge, len(hdr))
	}
	total := 4 + len(hdr) + len(c.Body)
	buf := make([]byte, 4+total)
	binary.BigEndian.PutUint32(buf[0:], uint32(total))
	binary.BigEndian.PutUint32(buf[4:], uint32(len(hdr))) // type 0 = JSON in the high byte
	copy(buf[8:], hdr)
	copy(buf[8+len(hdr):], c.Body)
	return buf, nil
}

// ReadFrame reads one frame from r and returns the bytes after its
// length prefix. A length above max (or under 4) is an error; nothing is
// allocated for it.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(lenBuf[:]))
	if n > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameTooLarge, n, max)
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: length %d", ErrMalformed, n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, fmt.Errorf("%w: truncated: %v", ErrMalformed, err)
	}
	return frame, nil
}

// Decode parses a frame without its length prefix (what ReadFrame
// returns).
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no header length", ErrMalformed, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	typ, hlen := byte(word>>24), int(word&0xFFFFFF)
	if typ != CodecJSON {
		return nil, fmt.Errorf("%w: type %d", ErrUnsupportedCodec, typ)
	}
	if hlen > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d, %d bytes left", ErrMalformed, hlen, len(frame)-4)
	}
	c := &Command{}
	if err := json.Unmarshal(frame[4:4+hlen], c); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if body := frame[4+hlen:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}
