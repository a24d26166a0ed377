package broker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/mqlite/mqlite"
)

const childEnv = "MQLITE_BROKER_CHILD" // "dir|addr": run a broker and never return

// runChild serves a FlushSync store until the process is killed.
func runChild(spec string) {
	dir, addr, _ := strings.Cut(spec, "|")
	st, err := mqlite.Open(dir, &mqlite.Options{Flush: mqlite.FlushSync})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	b, err := Listen(st, &Options{Addr: addr})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("READY", b.Addr())
	select {}
}

type child struct {
	cmd  *exec.Cmd
	addr string
}

func startChild(t *testing.T, dir, addr string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir+"|"+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "READY ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child broker: %q %v", line, err)
	}
	c := &child{cmd: cmd, addr: strings.TrimSpace(strings.TrimPrefix(line, "READY "))}
	t.Cleanup(c.kill)
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill() // SIGKILL: no shutdown path runs
		c.cmd.Wait()
	}
}

func TestKillNineRestartKeepsAckedSends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	dir := t.TempDir()
	c1 := startChild(t, dir, "127.0.0.1:0")
	f := &fixture{t: t, nsAddr: primitive.NamesrvAddr{c1.addr}}
	topic := uniq("T")
	p := newProducer(t, f)
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("m%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			cancel()
			if err == nil && res.Status == primitive.SendOK {
				mu.Lock()
				acked = append(acked, body)
				mu.Unlock()
			}
		}
	}()
	eventually(t, 20*time.Second, "200 acknowledged sends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	})
	c1.kill() // while the producer is sending
	close(stop)
	<-done
	mu.Lock()
	want := append([]string(nil), acked...)
	mu.Unlock()

	c2 := startChild(t, dir, c1.addr)
	if c2.addr != c1.addr {
		t.Fatalf("restarted on %s, want %s", c2.addr, c1.addr)
	}
	var got collect
	newPushConsumer(t, f, uniq("g"), topic, consumer.MessageSelector{}, got.handle)
	eventually(t, 60*time.Second, fmt.Sprintf("all %d acknowledged messages", len(want)), func() bool {
		b := got.bodies()
		for _, w := range want {
			if b[w] == 0 {
				return false
			}
		}
		return true
	})
}
