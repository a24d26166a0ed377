package producer

import (
	"bytes"
	"compress/zlib"
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// compressed returns a copy of m with its body zlib-compressed and the
// compression flags set; m itself is not modified.
func compressed(m *message.Message, level int) (*message.Message, error) {
	var buf bytes.Buffer
	buf.Grow(len(m.Body) / 2)
	w, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, fmt.Errorf("mqlite/producer: compress: %w: %w", errs.ErrInvalidArgument, err)
	}
	w.Write(m.Body) // a bytes.Buffer does not fail
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("mqlite/producer: compress: %w", err)
	}
	if buf.Len() >= len(m.Body) {
		return m, nil // incompressible: store as is
	}
	c := *m
	c.Body = buf.Bytes()
	c.SysFlag |= message.SysCompressed | message.SysCompressZip
	return &c, nil
}
