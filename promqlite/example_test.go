package promqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/promqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Register the collector with a registry and serve it on /metrics; each
// scrape reads the store.
func ExampleNewCollector() {
	s, err := mqlite.Open("orders", &mqlite.Options{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("hi")}, 0); err != nil {
		log.Fatal(err)
	}
	if err := s.WaitVisible(ctx); err != nil { // dispatched: counted in its queue
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	// WithoutQueueLabels keeps one series per topic on stores with many
	// queues; WithConstLabels tells several stores apart.
	reg.MustRegister(promqlite.NewCollector(s,
		promqlite.WithoutQueueLabels(),
		promqlite.WithConstLabels(prometheus.Labels{"store": "orders"})))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	// A scrape, as Prometheus would do it.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "mqlite_up") ||
			strings.HasPrefix(line, "mqlite_messages_put_total") || strings.HasPrefix(line, `mqlite_topic_messages{store="orders",system="false"`) {
			fmt.Println(line)
		}
	}
	// Output:
	// mqlite_messages_put_total{store="orders"} 1
	// mqlite_topic_messages{store="orders",system="false",topic="orders"} 1
	// mqlite_up{store="orders"} 1
}
