package txn

import (
	"context"
	"fmt"

	"github.com/mqlite/mqlite/message"
)

// TxState is the outcome of a local transaction, as RocketMQ's
// LocalTransactionState. The zero value is not a state: a local
// transaction or checker returning it (or any other undefined value) is
// treated as Unknown and reported.
type TxState int

const (
	// CommitMessage makes the message visible in its real topic.
	CommitMessage TxState = iota + 1
	// RollbackMessage discards the message.
	RollbackMessage
	// Unknown leaves the message to the check-back service.
	Unknown
)

// String returns RocketMQ's name of the state (UNKNOW is RocketMQ's
// spelling).
func (s TxState) String() string {
	switch s {
	case CommitMessage:
		return "COMMIT_MESSAGE"
	case RollbackMessage:
		return "ROLLBACK_MESSAGE"
	case Unknown:
		return "UNKNOW"
	}
	return fmt.Sprintf("TxState(%d)", int(s))
}

func (s TxState) valid() bool { return s >= CommitMessage && s <= Unknown }

// LocalTx runs the local transaction of a message whose half message is
// stored. m is the message being sent, with UniqKey set to the
// transaction ID; it must not be modified.
type LocalTx func(ctx context.Context, m *message.Message) TxState

// Checker answers the check-back for a half message whose outcome is not
// recorded: the local transaction returned Unknown, failed, or the process
// stopped before recording it. m is the half message with its real topic
// and queue restored (QueueOffset, CommitLogOffset and MsgID are the half
// message's), its UniqKey is the transaction ID, and the property
// PropCheckTimes counts the checks including this one. A checker must be
// safe for concurrent use; a panic counts as Unknown.
type Checker func(ctx context.Context, m *message.MessageExt) TxState

// Property names, as RocketMQ spells them. Only PropCheckImmunity may be
// set by users; the others are written by this package.
const (
	// PropCheckImmunity delays the first check-back of a message: its
	// value is a whole number of seconds, counted from the time the half
	// message is stored. A value below the service's Timeout means the
	// Timeout.
	PropCheckImmunity = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	// PropTranMsg marks a half message ("true").
	PropTranMsg = "TRAN_MSG"
	// PropProducerGroup names the producer group of a half message; its
	// checker answers the check-back.
	PropProducerGroup = "PGROUP"
	// PropCheckTimes is the number of check-backs of a message, set on
	// the message handed to a checker and on a message parked in
	// topic.CheckMax.
	PropCheckTimes = "TRANSACTION_CHECK_TIMES"
	// PropTxState names the outcome an op record resolves a half
	// message with (COMMIT_MESSAGE, ROLLBACK_MESSAGE or DISCARD); it is
	// informational.
	PropTxState = "TX_STATE"
)

// Op record tags (topic.OpHalf, queue 0).
const (
	// OpTagDone resolves the half messages whose queue offsets the body
	// lists: committed, rolled back or discarded. RocketMQ's "d".
	OpTagDone = "d"
	// OpTagCheck counts one check-back of the half messages the body
	// lists.
	OpTagCheck = "c"
)

// DefaultGroup is the producer group of a Producer whose options name
// none.
const DefaultGroup = "DEFAULT_TX_GROUP"
