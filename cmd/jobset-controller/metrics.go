package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	ctrlmetrics "github.com/nativejobset/jobset/pkg/controller/metrics"
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

// serveMetrics serves /metrics over plain HTTP on addr until ctx ends and
// returns the address listened on.
func serveMetrics(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --metrics-bind-address %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}
