package broker

import "github.com/mqlite/mqlite/broker/remoting"

// ACL is a placeholder until access control lands.
type ACL struct{}

func (b *Broker) checkACL(c *conn, req *remoting.Command) *remoting.Command { return nil }
