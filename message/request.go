package message

// Request-reply properties, with RocketMQ's names (MessageConst). A
// request carries PropCorrelationID, PropReplyToClient and PropTTL; its
// reply carries the same correlation ID and reply-to, and PropMessageType
// set to ReplyMessageFlag.
const (
	// PropCorrelationID pairs a reply with its request.
	PropCorrelationID = "CORRELATION_ID"
	// PropReplyToClient names the requester the reply goes back to.
	PropReplyToClient = "REPLY_TO_CLIENT"
	// PropTTL is how long the requester waits, in milliseconds.
	PropTTL = "TTL"
	// PropMessageType is ReplyMessageFlag on a reply.
	PropMessageType = "MSG_TYPE"
	// ReplyMessageFlag is the PropMessageType value of a reply.
	ReplyMessageFlag = "reply"
)

// IsRequest reports whether m is a request a replier may answer: it has a
// correlation ID and a reply-to, and is not itself a reply.
func IsRequest(m *Message) bool {
	return m != nil && m.Properties[PropCorrelationID] != "" && m.Properties[PropReplyToClient] != "" &&
		m.Properties[PropMessageType] != ReplyMessageFlag
}
