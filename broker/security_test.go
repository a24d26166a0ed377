package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func aclFixture(t *testing.T) (*fixture, string, string) {
	pubTopic, denied := uniq("Pub"), uniq("Denied")
	acl := &ACL{Accounts: []Account{{
		AccessKey: "app", SecretKey: "app-secret",
		DefaultTopicPerm: PermPubSub, DefaultGroupPerm: PermSub,
		Topics: map[string]Perm{denied: PermDeny},
		Groups: map[string]Perm{"blocked_group": PermDeny},
	}}}
	return startBroker(t, nil, &Options{ACL: acl}), pubTopic, denied
}

func TestACLWithTheRealClient(t *testing.T) {
	f, topic, denied := aclFixture(t)
	good := primitive.Credentials{AccessKey: "app", SecretKey: "app-secret"}
	p := newProducer(t, f, producer.WithCredentials(good))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("allowed"))); err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	_, err := p.SendSync(context.Background(), primitive.NewMessage(denied, []byte("x")))
	if err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("send to a denied topic: %v", err)
	}
	wrong := newProducer(t, f, producer.WithCredentials(primitive.Credentials{AccessKey: "app", SecretKey: "guess"}))
	if _, err := wrong.SendSync(context.Background(), primitive.NewMessage(topic, []byte("x"))); err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("wrong secret: %v", err)
	}
	none := newProducer(t, f)
	if _, err := none.SendSync(context.Background(), primitive.NewMessage(topic, []byte("x"))); err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("no credentials: %v", err)
	}
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle, consumer.WithCredentials(good))
	eventually(t, 20*time.Second, "the allowed message", func() bool { return got.count() >= 1 })
	if b := got.bodies(); len(b) != 1 || b["allowed"] != 1 {
		t.Fatalf("consumed %v", b)
	}
}

func TestACLPerGroupAndSignature(t *testing.T) {
	f, topic, denied := aclFixture(t)
	c := dialRaw(t, f.b.Addr())
	signed := func(fields map[string]string, secret string) map[string]string {
		fields["AccessKey"] = "app"
		fields["Signature"] = Sign(fields, nil, secret)
		return fields
	}
	pull := func(group, topic string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1"}
	}
	c.call(reqGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	if r := c.call(reqPullMessage, signed(pull("ok_group", topic), "app-secret"), nil); r.Code != resPullNotFound {
		t.Fatalf("allowed pull: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqPullMessage, signed(pull("blocked_group", topic), "app-secret"), nil); r.Code != resNoPermission {
		t.Fatalf("denied group: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqPullMessage, signed(pull("ok_group", denied), "app-secret"), nil); r.Code != resNoPermission {
		t.Fatalf("denied topic: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqPullMessage, signed(pull("ok_group", topic), "wrong"), nil); r.Code != resNoPermission {
		t.Fatalf("bad signature: %d %s", r.Code, r.Remark)
	}
	if r := c.call(reqGetBrokerRuntimeInfo, signed(map[string]string{}, "app-secret"), nil); r.Code != resNoPermission {
		t.Fatalf("runtime info without admin: %d %s", r.Code, r.Remark)
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mqlite-broker-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// tlsClientEnv makes the test binary a TLS client of the broker at its
// value: the client library's TLS switch is process-wide (WithTls writes
// its shared default remoting config), so the TLS client runs in a process
// of its own.
const tlsClientEnv = "MQLITE_BROKER_TLS_CLIENT"

func runTLSClient(addr string) {
	rlog.SetLogLevel("fatal")
	ns := primitive.NamesrvAddr{addr}
	topic := fmt.Sprintf("TLS_%d", os.Getpid())
	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithTls(true), producer.WithRetry(0))
	if err == nil {
		err = p.Start()
	}
	if err == nil {
		_, err = p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("secret")))
	}
	if err != nil {
		fmt.Println("ERROR send:", err)
		os.Exit(2)
	}
	got := make(chan string, 1)
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithTls(true), consumer.WithGroupName("tls_group"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			select {
			case got <- string(msgs[0].Body):
			default:
			}
			return consumer.ConsumeSuccess, nil
		})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		fmt.Println("ERROR consume:", err)
		os.Exit(2)
	}
	select {
	case body := <-got:
		fmt.Println("GOT", body)
		os.Exit(0)
	case <-time.After(20 * time.Second):
		fmt.Println("ERROR: nothing consumed")
		os.Exit(2)
	}
}

func TestTLSRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a client process")
	}
	f := startBroker(t, nil, &Options{TLS: selfSigned(t)})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), tlsClientEnv+"="+f.b.Addr())
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "GOT secret" {
		t.Fatalf("TLS client: %v: %s", err, out)
	}
	// A plaintext client is not served.
	c := dialRaw(t, f.b.Addr())
	c.writeRaw([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	c.expectClosed()
}

func TestACLFromJSON(t *testing.T) {
	raw := `{"Accounts":[{"AccessKey":"a","SecretKey":"s","DefaultTopicPerm":"PUB|SUB","DefaultGroupPerm":2,
		"Topics":{"x":"DENY","y":"pub"},"Groups":{"g":"SUB"}}]}`
	var acl ACL
	if err := json.Unmarshal([]byte(raw), &acl); err != nil {
		t.Fatal(err)
	}
	a := acl.Accounts[0]
	if a.DefaultTopicPerm != PermPubSub || a.DefaultGroupPerm != PermSub || a.Topics["x"] != PermDeny || a.Topics["y"] != PermPub || a.Groups["g"] != PermSub {
		t.Fatalf("parsed %+v", a)
	}
	for _, bad := range []string{`"ALL"`, `7`, `-1`, `{}`} {
		var p Perm
		if err := json.Unmarshal([]byte(bad), &p); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	out, err := json.Marshal(a.Topics)
	if err != nil || string(out) != `{"x":"DENY","y":"PUB"}` {
		t.Fatalf("marshal: %s %v", out, err)
	}
}
