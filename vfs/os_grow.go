//go:build !linux && !darwin

package vfs

// grow sets the file's length to size with ftruncate (SetEndOfFile on
// Windows) unless it is that long already: Allocate where the platform
// has no call that reserves blocks.
func (o *osFile) grow(size int64) error {
	fi, err := o.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	return o.f.Truncate(size)
}
