package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"

	ctrlmetrics "github.com/nativejobset/jobset/pkg/controller/metrics"
	"github.com/nativejobset/jobset/pkg/httpserver"
	"github.com/nativejobset/jobset/pkg/version"
)

// controllerMetrics is everything /metrics serves, in one registry.
type controllerMetrics struct {
	registry  *prometheus.Registry
	recorder  *ctrlmetrics.Recorder
	workqueue *ctrlmetrics.WorkqueueProvider
	jobsets   *ctrlmetrics.JobSetCollector
}

func newControllerMetrics(maxJobSets int) (*controllerMetrics, error) {
	reg := ctrlmetrics.NewRegistry()
	v := version.Get()
	if err := ctrlmetrics.RegisterBuildInfo(reg, v.Version, v.Commit, v.GoVersion); err != nil {
		return nil, err
	}
	rec, err := ctrlmetrics.NewRecorder(reg)
	if err != nil {
		return nil, err
	}
	col := ctrlmetrics.NewJobSetCollector(maxJobSets)
	if err := reg.Register(col); err != nil {
		return nil, err
	}
	return &controllerMetrics{
		registry:  reg,
		recorder:  rec,
		workqueue: ctrlmetrics.NewWorkqueueProvider(reg),
		jobsets:   col,
	}, nil
}

// installWorkqueueProvider makes the registry client-go's global work
// queue metrics provider. client-go keeps only the first provider set in
// the process; the controller's queue also gets the provider explicitly
// (controller.Options.WorkqueueMetrics), so it does not depend on that.
func (m *controllerMetrics) installWorkqueueProvider() {
	workqueue.SetProvider(m.workqueue)
}

// metricsHandler serves the registry in the Prometheus text format.
func (m *controllerMetrics) metricsHandler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.registry,
		promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
}

// handler is the plain-HTTP endpoint: /metrics, and with profiling
// Go's /debug/pprof/ handlers (loopback by default, like /metrics).
func (m *controllerMetrics) handler(profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.metricsHandler())
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// profileWriteTimeout replaces the write timeout with --profiling: Go's
// pprof handlers refuse a profile or trace as long as the server's write
// timeout, and their default is 30s.
const profileWriteTimeout = 2 * time.Minute

// serveMetrics serves h over plain HTTP on addr until ctx ends and returns
// the address listened on. profiling says whether h serves /debug/pprof/.
func serveMetrics(ctx context.Context, addr string, h http.Handler, profiling bool) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --metrics-bind-address %s: %w", addr, err)
	}
	httpserver.Serve(ctx, "metrics", metricsServer(h, profiling), ln)
	return ln.Addr(), nil
}

func metricsServer(h http.Handler, profiling bool) *http.Server {
	srv := httpserver.New(h)
	if profiling {
		srv.WriteTimeout = profileWriteTimeout
	}
	return srv
}
