// Command mqlite-broker serves an mqlite store over Apache RocketMQ's
// remoting protocol: point a RocketMQ client's name server address at it.
//
//	mqlite-broker -dir /var/lib/mqlite -addr 127.0.0.1:10911 -flush sync
//
// It listens on loopback unless -addr says otherwise. -tls-cert and
// -tls-key turn on TLS; -acl names a JSON file of accounts (see
// broker.ACL). SIGINT or SIGTERM shut it down gracefully: it stops
// accepting, finishes the requests in flight, then closes the store.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mqlite-broker:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "mqlite-data", "store directory")
	addr := flag.String("addr", broker.DefaultAddr, "listen address")
	advertise := flag.String("advertise", "", "address clients are told to use (default: the listen address)")
	flush := flag.String("flush", "async", "flush mode: async or sync")
	certFile := flag.String("tls-cert", "", "TLS certificate (PEM)")
	keyFile := flag.String("tls-key", "", "TLS key (PEM)")
	aclFile := flag.String("acl", "", "ACL accounts (JSON)")
	verbose := flag.Bool("v", false, "log requests the broker refuses")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	so := &mqlite.Options{Logger: log}
	switch *flush {
	case "async":
	case "sync":
		so.Flush = mqlite.FlushSync
	default:
		return fmt.Errorf("-flush %q: want async or sync", *flush)
	}
	bo := &broker.Options{Addr: *addr, AdvertiseAddr: *advertise, Logger: log}
	if *certFile != "" || *keyFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return err
		}
		bo.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if *aclFile != "" {
		raw, err := os.ReadFile(*aclFile)
		if err != nil {
			return err
		}
		bo.ACL = &broker.ACL{}
		if err := json.Unmarshal(raw, bo.ACL); err != nil {
			return fmt.Errorf("%s: %w", *aclFile, err)
		}
	}
	store, err := mqlite.Open(*dir, so)
	if err != nil {
		return err
	}
	b, err := broker.Listen(store, bo)
	if err != nil {
		store.Close()
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = b.Shutdown(ctx)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	return err
}
