package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// TestUpstreamParity checks, on one short JobSet, what users of upstream
// JobSet read: pod labels (priority, job-restart-attempt), the fields of
// the events, upstream's completion counter and a schema-required field.
func TestUpstreamParity(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	pcName := ns + "-high"
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pcName}, Value: 1000}
	if _, err := cluster.kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), pcName, metav1.DeleteOptions{})
	})
	rj := replicatedJob("workers", 2, 1, "3s")
	rj.Template.Spec.Template.Spec.PriorityClassName = pcName
	createJobSet(t, runningJobSet(ns, "parity", rj))

	t.Run("pod labels", func(t *testing.T) {
		sel := fmt.Sprintf("%s=parity,%s=1000,%s=0", v1alpha2.JobSetNameKey, v1alpha2.PriorityKey, v1alpha2.JobRestartsKey)
		eventually(t, time.Minute, "two pods selected by priority and first job-restart-attempt", func(ctx context.Context) (bool, error) {
			pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
					return false, fmt.Errorf("pod %s has priority %v, its label says 1000", p.Name, p.Spec.Priority)
				}
			}
			return len(pods.Items) == 2, nil
		})
	})

	waitStatus(t, ns, "parity", "Completed", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.TerminalState == string(v1alpha2.JobSetCompleted)
	})

	t.Run("events", func(t *testing.T) {
		list, err := cluster.kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=parity"})
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, e := range list.Items {
			if e.Regarding.Kind != "JobSet" {
				continue
			}
			seen++
			if e.ReportingController != "jobset" || e.Action != "Reconciling" {
				t.Errorf("event %s: reportingController %q, action %q; upstream's are \"jobset\", \"Reconciling\"", e.Reason, e.ReportingController, e.Action)
			}
		}
		if seen == 0 {
			t.Fatalf("no events about the JobSet")
		}
	})

	t.Run("upstream completion counter", func(t *testing.T) {
		want := fmt.Sprintf(`jobset_completed_total{jobset_name="parity",namespace=%q} 1`, ns)
		url := controllerMetricsURL(t)
		eventually(t, time.Minute, want, func(ctx context.Context) (bool, error) {
			body, err := scrape(url)
			return err == nil && strings.Contains(body, want), nil
		})
	})

	t.Run("pod template without containers", func(t *testing.T) {
		bad := runningJobSet(ns, "no-containers", replicatedJob("workers", 1, 1, ""))
		bad.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container(nil)
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, bad, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "spec.replicatedJobs[0].template.spec.template.spec.containers: Required value") {
			t.Fatalf("create without containers: %v", err)
		}
	})
}
