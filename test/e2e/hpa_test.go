package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// kwok's simulated CPU usage of a running pod (hack/local/kwok/metrics.yaml).
const usageCPU = "kwok.x-k8s.io/usage-cpu"

// A real autoscaling/v2 HorizontalPodAutoscaler (kube-controller-manager's
// HPA controller, metrics-server reading kwok's simulated usage) drives the
// pods per child Job of one replicatedJob through replicatedjobs/scale, while
// a second HPA on another replicatedJob of the same JobSet stays put.
//
// The arithmetic: every pod requests 500m and the target is 50%, i.e. 250m
// per pod. The HPA averages over status.selector, the pods of job-index 0.
// Pods start at 200m (ratio 0.8: ceil(2*0.8) = 2, no change). Raised to
// 750m (ratio 3) the HPA wants ceil(2*3) = 6 = maxReplicas; lowered to 25m
// (ratio 0.1) it wants ceil(6*0.1) = 1 = minReplicas. The test keeps every
// running workers pod, new ones included, at the usage of the phase.
func TestHPAScalesReplicatedJob(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()

	workers := replicatedJob("workers", 2, 2, "")
	other := replicatedJob("other", 1, 1, "")
	for _, rj := range []*v1alpha2.ReplicatedJob{&workers, &other} {
		pod := &rj.Template.Spec.Template
		pod.Annotations[usageCPU] = "200m"
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	}
	createJobSet(t, &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "auto", Namespace: ns},
		Spec:       v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{workers, other}},
	})
	waitJobs(t, ns, "auto", 3, "0")
	// The HPA leaves out of a scale-down any pod it still counts as
	// starting (not Ready, or no sample since it became Ready): an HPA
	// created earlier would scale workers 2 -> 1 from one pod's sample.
	waitPodMetrics(t, ns, "auto", 5)

	hpas := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(ns)
	for _, h := range []struct {
		rj       string
		min, max int32
	}{{"workers", 1, 6}, {"other", 1, 3}} {
		if _, err := hpas.Create(ctx, cpuHPA(h.rj, "auto."+h.rj, h.min, h.max), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating HPA %s: %v", h.rj, err)
		}
	}

	// Both HPAs find their scale target and metrics, at their current size.
	start := time.Now()
	waitHPA(t, ns, "workers", 2)
	waitHPA(t, ns, "other", 1)
	t.Logf("HPAs active after %s", time.Since(start).Round(time.Second))

	for _, phase := range []struct {
		usage string
		want  int32
	}{{"750m", 6}, {"25m", 1}} {
		eventually(t, 3*time.Minute, fmt.Sprintf("workers at %s to run %d pods per child Job", phase.usage, phase.want),
			func(ctx context.Context) (bool, error) {
				if err := setUsage(ctx, ns, "auto", "workers", phase.usage); err != nil {
					return false, nil
				}
				return podsPerJob(ctx, ns, "auto", "workers", 2, phase.want)
			})
		t.Logf("workers at %d pods per Job %s after usage %s", phase.want, time.Since(start).Round(time.Second), phase.usage)
		js := getJobSet(t, ns, "auto")
		for _, rj := range js.Spec.ReplicatedJobs {
			want := map[string]int32{"workers": phase.want, "other": 1}[rj.Name]
			p, c := ptr.Deref(rj.Template.Spec.Parallelism, 0), ptr.Deref(rj.Template.Spec.Completions, 0)
			if p != want || c != want {
				t.Errorf("JobSet replicatedJob %s parallelism/completions = %d/%d, want %d", rj.Name, p, c, want)
			}
		}
		// The Scale reports the new size, in spec and as observed by the controller.
		wantSelector := v1alpha2.JobSetNameKey + "=auto," + v1alpha2.ReplicatedJobNameKey + "=workers," + v1alpha2.JobIndexKey + "=0"
		var scale autoscalingv1.Scale
		eventually(t, 30*time.Second, fmt.Sprintf("Scale of auto.workers at %d", phase.want), func(ctx context.Context) (bool, error) {
			raw, err := kubectlErr("get", "--raw", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/"+ns+"/replicatedjobs/auto.workers/scale")
			if err != nil || json.Unmarshal([]byte(raw), &scale) != nil {
				return false, nil
			}
			return scale.Spec.Replicas == phase.want && scale.Status.Replicas == phase.want, nil
		})
		if scale.Status.Selector != wantSelector {
			t.Errorf("Scale of auto.workers selector = %q, want %q", scale.Status.Selector, wantSelector)
		}
		waitHPA(t, ns, "workers", phase.want)
		// The other HPA averages only over the pods of `other` (200m, below
		// its target), so the workers' usage never reaches it.
		waitHPA(t, ns, "other", 1)
		if ok, err := podsPerJob(ctx, ns, "auto", "other", 1, 1); !ok || err != nil {
			t.Errorf("replicatedJob other does not run 1 pod in its 1 Job (err %v)", err)
		}
		start = time.Now()
	}
	// The HPA on `other` never rescaled it.
	if h, err := hpas.Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("getting HPA other: %v", err)
	} else if h.Status.LastScaleTime != nil {
		t.Errorf("HPA other scaled at %v, want never", h.Status.LastScaleTime)
	}
}

// cpuHPA builds an HPA on the ReplicatedJob `target` that holds CPU utilization
// at 50% of the requests and scales both ways at once.
func cpuHPA(name, target string, min, max int32) *autoscalingv2.HorizontalPodAutoscaler {
	immediate := func(policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), Policies: policies}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "ReplicatedJob", Name: target,
			},
			MinReplicas: ptr.To(min),
			MaxReplicas: max,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: immediate(
					autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 1000, PeriodSeconds: 15},
					autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 10, PeriodSeconds: 15}),
				ScaleDown: immediate(
					autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}),
			},
		},
	}
}

// waitHPA waits until the HPA reports `replicas` as both current and desired
// with ScalingActive and AbleToScale True.
func waitHPA(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	var last *autoscalingv2.HorizontalPodAutoscaler
	cond := func(h *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
		for i := range h.Status.Conditions {
			if h.Status.Conditions[i].Type == typ {
				return &h.Status.Conditions[i]
			}
		}
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("HPA %s status: %+v", name, last.Status)
		}
	})
	eventually(t, 2*time.Minute, fmt.Sprintf("HPA %s at %d replicas and active", name, replicas), func(ctx context.Context) (bool, error) {
		h, err := cluster.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = h
		active, able := cond(h, autoscalingv2.ScalingActive), cond(h, autoscalingv2.AbleToScale)
		return h.Status.CurrentReplicas == replicas && h.Status.DesiredReplicas == replicas &&
			active != nil && active.Status == corev1.ConditionTrue &&
			able != nil && able.Status == corev1.ConditionTrue, nil
	})
}

// setUsage annotates every running pod of the replicatedJob that does not
// yet carry it with the given simulated CPU usage.
func setUsage(ctx context.Context, ns, jobset, rj, usage string) error {
	pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha2.JobSetNameKey + "=" + jobset + "," + v1alpha2.ReplicatedJobNameKey + "=" + rj,
	})
	if err != nil {
		return err
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, usageCPU, usage))
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Annotations[usageCPU] == usage {
			continue
		}
		if _, err := cluster.kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// podsPerJob reports whether the replicatedJob has `jobs` child Jobs, each
// with parallelism and completions `want` and exactly `want` running pods.
func podsPerJob(ctx context.Context, ns, jobset, rj string, jobs int, want int32) (bool, error) {
	list, err := cluster.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1alpha2.JobSetNameKey + "=" + jobset + "," + v1alpha2.ReplicatedJobNameKey + "=" + rj,
	})
	if err != nil || len(list.Items) != jobs {
		return false, nil
	}
	for _, j := range list.Items {
		if ptr.Deref(j.Spec.Parallelism, 0) != want || ptr.Deref(j.Spec.Completions, 0) != want {
			return false, nil
		}
		pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + j.Name})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != int(want) {
			return false, nil
		}
	}
	return true, nil
}

// waitPodMetrics waits until the JobSet runs `pods` Ready pods and
// metrics-server has, for each, a sample whose window starts after the pod
// became Ready, as the HPA requires before it counts a new pod.
func waitPodMetrics(t *testing.T, ns, jobset string, pods int) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d Ready pods of %s with metrics", pods, jobset), func(ctx context.Context) (bool, error) {
		list, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha2.JobSetNameKey + "=" + jobset})
		if err != nil {
			return false, nil
		}
		readySince := map[string]time.Time{}
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					readySince[p.Name] = c.LastTransitionTime.Time
				}
			}
		}
		if len(readySince) != pods {
			return false, nil
		}
		raw, err := kubectlErr("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods")
		if err != nil {
			return false, nil
		}
		var metrics struct {
			Items []struct {
				Metadata  metav1.ObjectMeta `json:"metadata"`
				Timestamp metav1.Time       `json:"timestamp"`
				Window    metav1.Duration   `json:"window"`
			} `json:"items"`
		}
		if json.Unmarshal([]byte(raw), &metrics) != nil {
			return false, nil
		}
		fresh := 0
		for _, m := range metrics.Items {
			if since, ok := readySince[m.Metadata.Name]; ok && !m.Timestamp.Time.Before(since.Add(m.Window.Duration)) {
				fresh++
			}
		}
		return fresh == pods, nil
	})
}
