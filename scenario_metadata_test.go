package mqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

// S22 with injected faults: ENOSPC or EIO at the temporary file's write,
// its fsync or the rename, for the checkpoint, the topic registry and the
// transaction progress. The error reaches the caller, the live file keeps
// its previous bytes, and the next attempt succeeds. (Consumer offsets
// and groups: consumer.TestConfigWriteFailures; a real ENOSPC on the
// registry: TestDiskFullTmpfs.)
func TestMetadataWriteFailures(t *testing.T) {
	for _, fault := range []error{syscall.ENOSPC, syscall.EIO} {
		for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename} {
			t.Run(fmt.Sprintf("%v/%d", fault, op), func(t *testing.T) {
				mem := vfs.NewMem()
				ffs := vfs.NewFaulty(mem)
				s, err := openFS(ffs, "/meta", &Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 128})
				require.NoError(t, err)
				defer s.Close()
				ctx := context.Background()
				tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{})
				require.NoError(t, err)
				defer tp.Close()
				_, err = tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("tx")}, func(context.Context, *Message) TxState { return CommitMessage })
				require.NoError(t, err)
				cp, err := s.currentCheckpoint()
				require.NoError(t, err)
				require.NoError(t, s.writeCheckpoint(cp))

				fail := func(file string) {
					ffs.SetInjector(func(o vfs.Op, path string) error {
						if o == op && filepath.Base(path) == file+".tmp" {
							return fault
						}
						return nil
					})
				}
				live := func(path string) string {
					b, err := vfs.ReadFile(mem, path)
					if errors.Is(err, vfs.ErrNotExist) {
						return "(none)"
					}
					require.NoError(t, err)
					return string(b)
				}

				// Checkpoint.
				cpPath := filepath.Join("/meta", checkpointName)
				before := live(cpPath)
				_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("moves the checkpoint")}, 0)
				require.NoError(t, err)
				require.NoError(t, s.WaitVisible(ctx))
				fail(checkpointName)
				cp, err = s.currentCheckpoint()
				require.NoError(t, err)
				require.ErrorIs(t, s.writeCheckpoint(cp), fault)
				require.Equal(t, before, live(cpPath), "checkpoint")
				ffs.SetInjector(nil)
				require.NoError(t, s.writeCheckpoint(cp))
				require.NotEqual(t, before, live(cpPath))

				// Topic registry.
				regPath := filepath.Join("/meta", configDir, topic.File)
				before = live(regPath)
				fail(topic.File)
				require.ErrorIs(t, s.CreateTopic("new", TopicConfig{Queues: 1}), fault)
				require.Equal(t, before, live(regPath), "topics")
				_, err = s.Topic("new")
				require.ErrorIs(t, err, ErrTopicNotFound)
				ffs.SetInjector(nil)
				require.NoError(t, s.CreateTopic("new", TopicConfig{Queues: 1}))

				// Transaction progress: the check round that resolves the
				// half message saves it.
				txPath := filepath.Join("/meta", configDir, txn.ProgressFile)
				before = live(txPath)
				fail(txn.ProgressFile)
				require.ErrorIs(t, s.CheckTransactions(ctx), fault)
				require.Equal(t, before, live(txPath), "transaction progress")
				ffs.SetInjector(nil)
				require.NoError(t, s.CheckTransactions(ctx))
				require.NotEqual(t, before, live(txPath))
			})
		}
	}
}
