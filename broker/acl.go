package broker

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mqlite/mqlite/broker/remoting"
)

// Perm is what an account may do with a topic or group, as RocketMQ's
// plain ACL names it.
type Perm int

// Permissions. The zero value denies.
const (
	PermDeny Perm = iota
	PermPub
	PermSub
	PermPubSub
)

func (p Perm) allows(need Perm) bool { return p == PermPubSub || p == need }

var permNames = map[string]Perm{"DENY": PermDeny, "PUB": PermPub, "SUB": PermSub, "PUB|SUB": PermPubSub, "SUB|PUB": PermPubSub}

// String returns RocketMQ's name of the permission: DENY, PUB, SUB or
// PUB|SUB.
func (p Perm) String() string {
	switch p {
	case PermPub:
		return "PUB"
	case PermSub:
		return "SUB"
	case PermPubSub:
		return "PUB|SUB"
	}
	return "DENY"
}

// MarshalJSON writes the permission's name.
func (p Perm) MarshalJSON() ([]byte, error) { return json.Marshal(p.String()) }

// UnmarshalJSON reads a name (as in RocketMQ's plain_acl.yml: "DENY",
// "PUB", "SUB", "PUB|SUB") or the number of the constant.
func (p *Perm) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		v, ok := permNames[strings.ToUpper(strings.ReplaceAll(name, " ", ""))]
		if !ok {
			return fmt.Errorf("%w: permission %q (want DENY, PUB, SUB or PUB|SUB)", ErrInvalidOptions, name)
		}
		*p = v
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil || n < int(PermDeny) || n > int(PermPubSub) {
		return fmt.Errorf("%w: permission %s", ErrInvalidOptions, b)
	}
	*p = Perm(n)
	return nil
}

// Account is one access key of the ACL.
type Account struct {
	AccessKey string
	SecretKey string
	// Admin may do everything, including creating topics and reading the
	// runtime info.
	Admin bool
	// DefaultTopicPerm and DefaultGroupPerm apply to topics and groups not
	// listed in Topics and Groups; zero denies.
	DefaultTopicPerm Perm
	DefaultGroupPerm Perm
	Topics           map[string]Perm
	Groups           map[string]Perm
}

// ACL is RocketMQ's access control as the official clients speak it
// (primitive.Credentials): every request carries an AccessKey and a
// Signature, the base64 HMAC-SHA1 under the account's secret key of the
// request's extension field values (Signature and SecurityToken left out)
// concatenated in the order of their names, followed by the body. A
// missing or unknown access key, a wrong signature, or a topic or group
// the account may not use gets NO_PERMISSION. Name-server requests (route
// and cluster info) are not checked, as RocketMQ's name server does not.
type ACL struct {
	Accounts []Account
}

func (a *ACL) account(ak string) *Account {
	for i := range a.Accounts {
		if a.Accounts[i].AccessKey == ak {
			return &a.Accounts[i]
		}
	}
	return nil
}

// Sign returns the signature of a request's fields and body under secret,
// as the client computes it.
func Sign(fields map[string]string, body []byte, secret string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "Signature" && k != "SecurityToken" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	mac := hmac.New(sha1.New, []byte(secret))
	for _, k := range keys {
		mac.Write([]byte(fields[k]))
	}
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (acc *Account) topicPerm(topic string) Perm {
	if g, ok := strings.CutPrefix(topic, "%RETRY%"); ok {
		return acc.groupPerm(g)
	}
	if p, ok := acc.Topics[topic]; ok {
		return p
	}
	return acc.DefaultTopicPerm
}

func (acc *Account) groupPerm(group string) Perm {
	if p, ok := acc.Groups[group]; ok {
		return p
	}
	return acc.DefaultGroupPerm
}

func noPerm(req *remoting.Command, format string, args ...any) *remoting.Command {
	return remoting.NewResponse(req, resNoPermission, fmt.Sprintf(format, args...))
}

// checkACL returns a NO_PERMISSION response, or nil when req may go on.
func (b *Broker) checkACL(c *conn, req *remoting.Command) *remoting.Command {
	acl := b.opts.ACL
	if acl == nil {
		return nil
	}
	switch req.Code {
	case reqGetRouteInfoByTopic, reqGetBrokerClusterInfo, reqGetAllTopicList:
		return nil
	}
	ak := req.Field("AccessKey")
	if ak == "" {
		return noPerm(req, "no AccessKey in the request")
	}
	acc := acl.account(ak)
	if acc == nil {
		return noPerm(req, "no account for AccessKey %s", ak)
	}
	want := Sign(req.ExtFields, req.Body, acc.SecretKey)
	if !hmac.Equal([]byte(want), []byte(req.Field("Signature"))) {
		return noPerm(req, "signature check failed for AccessKey %s", ak)
	}
	if acc.Admin {
		return nil
	}
	return b.checkResources(acc, req)
}

func (b *Broker) checkResources(acc *Account, req *remoting.Command) *remoting.Command {
	topic := func(need Perm, name string) *remoting.Command {
		if name != "" && !acc.topicPerm(name).allows(need) {
			return noPerm(req, "AccessKey %s may not %s topic %s", acc.AccessKey, verb(need), name)
		}
		return nil
	}
	group := func(name string) *remoting.Command {
		if name != "" && !acc.groupPerm(name).allows(PermSub) {
			return noPerm(req, "AccessKey %s may not use group %s", acc.AccessKey, name)
		}
		return nil
	}
	first := func(rs ...*remoting.Command) *remoting.Command {
		for _, r := range rs {
			if r != nil {
				return r
			}
		}
		return nil
	}
	switch req.Code {
	case reqSendMessage, reqSendMessageV2, reqSendBatchMessage, reqSendReplyMessage, reqSendReplyMessageV2:
		h, _ := parseSendHeader(req)
		return topic(PermPub, h.topic)
	case reqPullMessage, reqQueryConsumerOffset, reqUpdateConsumerOffset:
		return first(group(req.Field("consumerGroup")), topic(PermSub, req.Field("topic")))
	case reqGetMaxOffset, reqGetMinOffset, reqSearchOffsetByTimestamp, reqQueryMessage:
		return topic(PermSub, req.Field("topic"))
	case reqConsumerSendMsgBack:
		return group(req.Field("group"))
	case reqGetConsumerListByGroup:
		return group(req.Field("consumerGroup"))
	case reqLockBatchMQ, reqUnlockBatchMQ:
		var body lockBody
		_ = json.Unmarshal(req.Body, &body)
		return group(body.ConsumerGroup)
	case reqHeartBeat:
		var hb heartbeat
		_ = json.Unmarshal(req.Body, &hb)
		for _, cd := range hb.Consumers {
			if r := group(cd.GroupName); r != nil {
				return r
			}
			for _, s := range cd.Subs {
				if r := topic(PermSub, s.Topic); r != nil {
					return r
				}
			}
		}
		return nil
	case reqCreateTopic, reqGetBrokerRuntimeInfo:
		return noPerm(req, "AccessKey %s is not an admin", acc.AccessKey)
	}
	return nil
}

func verb(p Perm) string {
	if p == PermPub {
		return "publish to"
	}
	return "subscribe to"
}
