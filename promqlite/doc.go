// Package promqlite exports an mqlite Store's statistics to Prometheus.
//
// NewCollector returns a prometheus.Collector; register it with a
// registry and serve the registry with promhttp:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promqlite.NewCollector(store))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every scrape reads Store.Stats (positions, topics, queues, consumer
// lag, throughput totals, retention) and Store.ConsumerGroups (members);
// nothing is sampled in the background and nothing is cached, so an
// idle registry costs nothing.
//
// The package lives in its own module so that the root module does not
// depend on client_golang.
//
// # Cardinality
//
// By default queue-level series carry topic and queue labels, and
// consumer series carry group, topic, queue and consumer_instance (the
// member of a broadcasting group). A store with many queues can drop the
// queue labels with WithoutQueueLabels: queue series are then summed per
// topic and per-queue offsets are not exported.
//
// # A closed store
//
// A scrape of a closed (or nil) Store never panics: it reports
// mqlite_up 0 and the mqlite_scrape_errors_total counter, and no other
// series. Any other failure to read the store is reported the same way
// and also counted in mqlite_scrape_errors_total, so that one bad scrape
// does not fail the whole registry's exposition.
package promqlite
