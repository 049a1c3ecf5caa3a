package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// gaugesMatchKubectl compares the per-replicatedJob gauges of one scrape
// with `kubectl get jobset -o yaml` read right after it; it reports a
// mismatch (the status may have moved in between) rather than failing.
func gaugesMatchKubectl(t *testing.T, url, ns, name string) (bool, string) {
	t.Helper()
	body, err := scrape(url)
	if err != nil {
		return false, err.Error()
	}
	var js v1alpha2.JobSet
	if err := yaml.Unmarshal([]byte(kubectl(t, "get", "jobset", name, "-n", ns, "-o", "yaml")), &js); err != nil {
		t.Fatal(err)
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		st := rjStatus(&js, rj.Name)
		labels := fmt.Sprintf(`{jobset=%q,namespace=%q,replicatedjob=%q}`, name, ns, rj.Name)
		for metric, want := range map[string]int32{
			"kube_jobset_specified_replicas": *rj.Replicas,
			"kube_jobset_ready_replicas":     st.Ready,
			"kube_jobset_active_replicas":    st.Active,
			"kube_jobset_succeeded_replicas": st.Succeeded,
			"kube_jobset_failed_replicas":    st.Failed,
			"kube_jobset_suspended_replicas": st.Suspended,
		} {
			got, ok := sample(body, metric+labels)
			if !ok || got != float64(want) {
				return false, fmt.Sprintf("%s%s = %v (present %v), kubectl says %d", metric, labels, got, ok, want)
			}
		}
	}
	return true, ""
}

// One pod fails, the JobSet restarts and recovers: the gauges match the
// JobSet, the interruption yields one time-to-recover sample within the
// window the test measured, and the JobSet's series go with it.
//
// Not parallel: the histograms have no per-JobSet labels, so no other
// JobSet may recover while the test counts samples (parallel tests start
// only after the sequential ones).
func TestInterruptionMetrics(t *testing.T) {
	ns := namespace(t)
	url := controllerMetricsURL(t)
	const name = "recovering"
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			FailurePolicy:  &v1alpha2.FailurePolicy{MaxRestarts: 2},
			ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 2, 1, "")},
		},
	})
	waitAnnotation(t, ns, name, "to be available", func(a map[string]string) bool {
		return a[jobsetapi.AvailableSinceAnnotation] != ""
	})
	waitGaugesMatch(t, url, ns, name)

	before, err := scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	recoverCount, _ := sample(before, "jobset_time_to_recover_seconds_count")
	recoverSum, _ := sample(before, "jobset_time_to_recover_seconds_sum")
	attempts, _ := sample(before, `jobset_execution_attempts_total{reason="failure"}`)
	if n, ok := sample(before, "jobset_job_creation_latency_seconds_count"); !ok || n < 1 {
		t.Errorf("jobset_job_creation_latency_seconds_count = %v (present %v), want at least this JobSet's sample", n, ok)
	}

	failedAt := time.Now()
	failOnePod(t, ns, name+"-workers-0")
	waitJobs(t, ns, name, 2, "1")
	js := waitAnnotation(t, ns, name, "to recover", func(a map[string]string) bool {
		return a[jobsetapi.InterruptionsAnnotation] == "1" && a[jobsetapi.AvailableSinceAnnotation] != "" &&
			a[jobsetapi.InterruptedSecondsAnnotation] == ""
	})
	recoveredBy := time.Since(failedAt).Seconds()
	if js.Status.Restarts != 1 {
		t.Fatalf("restarts = %d, want 1", js.Status.Restarts)
	}

	// The controller observes the sample right after its annotation write
	// returns, so a scrape made as soon as the annotation is visible can
	// precede it: wait for the count to move, then require exactly one.
	var after string
	eventually(t, time.Minute, "the time-to-recover sample", func(context.Context) (bool, error) {
		body, err := scrape(url)
		if err != nil {
			return false, nil
		}
		after = body
		n, _ := sample(body, "jobset_time_to_recover_seconds_count")
		return n > recoverCount, nil
	})
	count, _ := sample(after, "jobset_time_to_recover_seconds_count")
	sum, _ := sample(after, "jobset_time_to_recover_seconds_sum")
	if count-recoverCount != 1 {
		t.Fatalf("time-to-recover samples: %v new, want 1", count-recoverCount)
	}
	if d := sum - recoverSum; d <= 0 || d > recoveredBy {
		t.Fatalf("time to recover = %.3fs, want within (0, %.3fs]", d, recoveredBy)
	} else {
		t.Logf("time to recover %.3fs, window %.3fs", d, recoveredBy)
	}
	if n, _ := sample(after, `jobset_execution_attempts_total{reason="failure"}`); n-attempts != 1 {
		t.Errorf("execution attempts by failure: %v new, want 1", n-attempts)
	}
	uptimeSeries := fmt.Sprintf(`jobset_uptime_seconds{jobset=%q,namespace=%q}`, name, ns)
	if up, ok := sample(after, uptimeSeries); !ok || up <= 0 {
		t.Errorf("%s = %v (present %v), want > 0", uptimeSeries, up, ok)
	}
	waitGaugesMatch(t, url, ns, name)

	if err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the JobSet's series to disappear", func(context.Context) (bool, error) {
		body, err := scrape(url)
		return err == nil && !strings.Contains(body, fmt.Sprintf(`jobset=%q,namespace=%q`, name, ns)), nil
	})
}

// waitGaugesMatch waits until a scrape agrees with kubectl.
func waitGaugesMatch(t *testing.T, url, ns, name string) {
	t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var ok bool
		ok, why = gaugesMatchKubectl(t, url, ns, name)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("the gauges never matched kubectl get jobset: %s", why)
	}
}

// waitAnnotation waits until the JobSet's annotations satisfy cond.
func waitAnnotation(t *testing.T, ns, name, what string, cond func(map[string]string) bool) *v1alpha2.JobSet {
	t.Helper()
	var js *v1alpha2.JobSet
	eventually(t, 2*time.Minute, name+" "+what, func(ctx context.Context) (bool, error) {
		got, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		js = got
		return cond(got.Annotations), nil
	})
	return js
}
