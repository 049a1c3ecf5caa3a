package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// stackEnv reads a value of the env file hack/local-up.sh writes for the
// stack.
func stackEnv(t *testing.T, key string) string {
	t.Helper()
	env, err := os.ReadFile(filepath.Join(cluster.localDir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	t.Fatalf("the stack's env file names no %s", key)
	return ""
}

// controllerMetricsURL is the controller's plain-HTTP /metrics.
func controllerMetricsURL(t *testing.T) string {
	t.Helper()
	return "http://127.0.0.1:" + stackEnv(t, "JOBSET_CONTROLLER_METRICS_PORT") + "/metrics"
}

func scrape(url string) (string, error) {
	return scrapeWith(http.DefaultClient, url, "")
}

// scrapeWith GETs url, with a bearer token when one is given, and returns
// the body of a 200 response.
func scrapeWith(client *http.Client, url, token string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", &statusError{code: resp.StatusCode}
	}
	return string(body), err
}

type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("status %d", e.code) }

// sample returns the value of one series (name with its labels as
// exposed, e.g. `jobset_restarts_total{reason="failure"}`) in a scrape.
func sample(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// The per-replicatedJob gauges follow the JobSet's status and disappear
// with the JobSet.
func TestControllerMetricsFollowJobSets(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	url := controllerMetricsURL(t)
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "observed", Namespace: ns},
		Spec:       v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 1, "")}},
	})
	labels := fmt.Sprintf(`jobset="observed",namespace=%q,replicatedjob="workers"`, ns)
	for _, want := range []string{
		"kube_jobset_specified_replicas{" + labels + "} 2",
		"kube_jobset_ready_replicas{" + labels + "} 2",
	} {
		eventually(t, 2*time.Minute, want, func(ctx context.Context) (bool, error) {
			body, err := scrape(url)
			return err == nil && strings.Contains(body, want), nil
		})
	}

	if err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Delete(context.Background(), "observed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the JobSet's series to disappear", func(ctx context.Context) (bool, error) {
		body, err := scrape(url)
		return err == nil && !strings.Contains(body, `jobset="observed"`), nil
	})
}
