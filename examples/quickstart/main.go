// Command quickstart opens a store in a temporary directory, sends a few
// messages with FlushSync, reads them back by ID, closes the store, reopens
// it and shows that the messages survived.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/mqlite/mqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "mqlite-quickstart-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := &mqlite.Options{Flush: mqlite.FlushSync, SegmentSize: 64 << 20}

	s, err := mqlite.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened store in %s (FlushSync)\n", dir)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		m := &mqlite.Message{
			Topic: "orders",
			Tags:  "created",
			Keys:  []string{fmt.Sprintf("order-%d", i)},
			Body:  []byte(fmt.Sprintf(`{"order":%d,"amount":%d}`, i, 10*(i+1))),
		}
		res, err := s.Put(ctx, m, i%2)
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.MsgID())
		fmt.Printf("sent   id=%s queue=%d offset=%d key=%s\n", res.MsgID(), res.QueueID, res.QueueOffset, m.Keys[0])
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("closed; reopening")

	s, err = mqlite.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, id := range ids {
		m, err := s.MessageByID(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("read   id=%s topic=%s tags=%s queue=%d offset=%d body=%s\n", m.MsgID, m.Topic, m.Tags, m.QueueID, m.QueueOffset, m.Body)
	}
	fmt.Printf("all %d messages survived the restart\n", len(ids))
}
