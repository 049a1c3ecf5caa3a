package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterBuildInfo registers jobset_build_info, a constant 1 whose labels
// name the running build, so that dashboards and alerts can tell which
// version each controller runs (and join it onto other series).
func RegisterBuildInfo(reg prometheus.Registerer, version, revision, goVersion string) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "jobset_build_info",
		Help: "A metric with a constant '1' value labeled by the version, VCS revision and Go version jobset-controller was built from.",
		ConstLabels: prometheus.Labels{
			"version":   version,
			"revision":  revision,
			"goversion": goVersion,
		},
	})
	g.Set(1)
	return reg.Register(g)
}
