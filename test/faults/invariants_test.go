package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/test/invariants"
)

// violations lists the JobSets and Jobs of the namespace and checks them
// (package invariants).
func violations(ctx context.Context, ns string, exp invariants.Expectation) ([]string, error) {
	jobsets, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobs, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return invariants.Namespace(jobsets.Items, jobs.Items, exp), nil
}

// checkInvariants polls until the namespace holds the invariants (a JobSet
// that never gets there is stuck), and fails the test with the last
// violations otherwise. It returns how long they took to hold.
func checkInvariants(t *testing.T, ns string, exp invariants.Expectation, timeout time.Duration) time.Duration {
	t.Helper()
	var last []string
	var lastErr error
	start := time.Now()
	err := waitPoll(timeout, func(ctx context.Context) (bool, error) {
		last, lastErr = violations(ctx, ns, exp)
		return lastErr == nil && len(last) == 0, nil
	})
	if err != nil {
		if len(last) > 20 {
			last = append(last[:20], fmt.Sprintf("... and %d more", len(last)-20))
		}
		t.Errorf("the invariants did not hold within %s (last error %v):\n%s", timeout, lastErr, strings.Join(last, "\n"))
		return timeout
	}
	t.Logf("invariants hold (%.1fs after the check began)", time.Since(start).Seconds())
	return time.Since(start)
}
