package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterBuildInfo(reg, "v0.1.0", "abc123", "go1.26.8"); err != nil {
		t.Fatal(err)
	}
	want := `# HELP jobset_build_info A metric with a constant '1' value labeled by the version, VCS revision and Go version jobset-controller was built from.
# TYPE jobset_build_info gauge
jobset_build_info{goversion="go1.26.8",revision="abc123",version="v0.1.0"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "jobset_build_info"); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuildInfo(reg, "v0.1.0", "abc123", "go1.26.8"); err == nil {
		t.Fatal("a second jobset_build_info was accepted by the same registry")
	}
}
