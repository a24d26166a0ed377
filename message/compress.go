package message

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
)

// Inflate restores the original body of a message stored compressed
// (SysCompressed set by a producer) and clears the compression flags. The
// inflated body may not exceed limit bytes. A message that is not
// compressed is left alone.
func Inflate(m *Message, limit int) error {
	if m.SysFlag&SysCompressed == 0 {
		return nil
	}
	r, err := zlib.NewReader(bytes.NewReader(m.Body))
	if err != nil {
		return fmt.Errorf("compressed body: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return fmt.Errorf("compressed body: %w", err)
	}
	if len(body) > limit {
		return fmt.Errorf("compressed body inflates past %d bytes", limit)
	}
	m.Body = body
	m.SysFlag &^= SysCompressed | SysCompressZip
	return nil
}
