package mqlite

import "time"

// farHour is a deletion hour twelve hours away, so the background pass
// never deletes on its own during a test.
func farHour() int {
	if h := (time.Now().Hour() + 12) % 24; h != 0 {
		return h
	}
	return 24
}
