package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// eventAction is the events.k8s.io action of the placer's events, the
// same as the controller's.
const eventAction = "Reconciling"

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pointerEscape escapes a map key for a JSON pointer.
func pointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// ungateOps removes the topology gate and pins the patch to the pod's
// resourceVersion, so that a pod changed meanwhile is not written from a
// stale copy (the write conflicts and the pass is retried).
func ungateOps(pod *corev1.Pod) []jsonPatchOp {
	var rest []corev1.PodSchedulingGate
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name != jobset.TopologyGate {
			rest = append(rest, g)
		}
	}
	ops := []jsonPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: pod.ResourceVersion}}
	if len(rest) == 0 {
		return append(ops, jsonPatchOp{Op: "remove", Path: "/spec/schedulingGates"})
	}
	return append(ops, jsonPatchOp{Op: "replace", Path: "/spec/schedulingGates", Value: rest})
}

// restrictToDomains returns the pod's node affinity narrowed to nodes whose
// label key has one of the domains. While a pod is gated, Kubernetes lets
// requirements be added to every existing required term, or a required
// selector be set when there was none.
func restrictToDomains(pod *corev1.Pod, key string, domains []string) *corev1.Affinity {
	aff := &corev1.Affinity{}
	if pod.Spec.Affinity != nil {
		aff = pod.Spec.Affinity.DeepCopy()
	}
	if aff.NodeAffinity == nil {
		aff.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: append([]string(nil), domains...)}
	na := aff.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		}
		return aff
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	return aff
}

// releaseLeaderOps lets a Job's first pod schedule into one of the domains.
func releaseLeaderOps(pod *corev1.Pod, key string, domains []string) []jsonPatchOp {
	ops := ungateOps(pod)
	// The scheduler reads the whole pod; the affinity is written whole.
	return append(ops, jsonPatchOp{Op: "add", Path: "/spec/affinity", Value: restrictToDomains(pod, key, domains)})
}

// pinOps sends a pod to the Job's domain. A nodeSelector entry the pod
// already has for the key is kept: it may only be added to, never changed.
func pinOps(pod *corev1.Pod, key, domain string) []jsonPatchOp {
	ops := ungateOps(pod)
	switch {
	case pod.Spec.NodeSelector == nil:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/nodeSelector", Value: map[string]string{key: domain}})
	case pod.Spec.NodeSelector[key] == "":
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/nodeSelector/" + pointerEscape(key), Value: domain})
	}
	return ops
}

// patchPod writes a pod and keeps the server's answer as the expected
// state; a failed write forgets the expectation, so that the next pass
// decides again from the cache.
func (p *Placer) patchPod(ctx context.Context, pod *corev1.Pod, ops []jsonPatchOp) error {
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	got, err := p.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: "jobset-controller"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		p.podWrites.Drop(writesGroup, string(pod.UID))
		p.mu.Lock()
		delete(p.releasedAt, pod.UID)
		p.mu.Unlock()
		return fmt.Errorf("patching pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p.podWrites.Update(writesGroup, string(got.UID), func(w podWrite) podWrite { w.pod = got; return w })
	return nil
}

// expectPod remembers the state a planned write gives a pod until the
// cache shows it (caughtUp), so that later passes build on it.
func (p *Placer) expectPod(intended *corev1.Pod, caughtUp func(cached *corev1.Pod) bool) {
	p.podWrites.Expect(writesGroup, string(intended.UID), podWrite{pod: intended, caughtUp: caughtUp})
}

func ungated(cached *corev1.Pod) bool { return !gated(cached) }

// withoutGate is a copy of the pod without the topology gate.
func withoutGate(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.SchedulingGates = nil
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name != jobset.TopologyGate {
			out.Spec.SchedulingGates = append(out.Spec.SchedulingGates, g)
		}
	}
	return out
}

// planRelease lets a leader schedule into one of the domains.
func (p *Placer) planRelease(acts *actions, pod *corev1.Pod, key string, domains []string) {
	ops := releaseLeaderOps(pod, key, domains)
	intended := withoutGate(pod)
	intended.Spec.Affinity = restrictToDomains(pod, key, domains)
	p.expectPod(intended, ungated)
	p.mu.Lock()
	p.releasedAt[pod.UID] = p.clock.Now()
	p.mu.Unlock()
	acts.add(func(ctx context.Context) error {
		klog.FromContext(ctx).V(2).Info("Releasing leader", "pod", klog.KObj(pod), "domains", domains)
		return p.patchPod(ctx, pod, ops)
	})
}

// planPin sends a gated pod to its Job's domain.
func (p *Placer) planPin(acts *actions, pod *corev1.Pod, key, domain string) {
	ops := pinOps(pod, key, domain)
	intended := withoutGate(pod)
	if intended.Spec.NodeSelector[key] == "" {
		intended.Spec.NodeSelector = withEntry(intended.Spec.NodeSelector, key, domain)
	}
	p.expectPod(intended, ungated)
	acts.add(func(ctx context.Context) error { return p.patchPod(ctx, pod, ops) })
}

// planRecord writes (or, with "", removes) a Job's recorded domain.
func (p *Placer) planRecord(acts *actions, j *placedJob, domain string) {
	p.jobWrites.Expect(writesGroup, string(j.uid), domain)
	acts.add(func(ctx context.Context) error { return p.recordDomain(ctx, j, domain) })
}

// recordDomain writes (or, with "", removes) the Job's domain annotation.
func (p *Placer) recordDomain(ctx context.Context, j *placedJob, domain string) error {
	var value any = domain
	if domain == "" {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         string(j.uid),
		"annotations": map[string]any{jobset.TopologyDomainKey: value},
	}})
	if err != nil {
		return err
	}
	_, err = p.kube.BatchV1().Jobs(j.ns).Patch(ctx, j.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "jobset-controller"})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the Job is gone or was replaced
	}
	if err != nil {
		p.jobWrites.Drop(writesGroup, string(j.uid))
		return fmt.Errorf("recording the topology domain of Job %s/%s: %w", j.ns, j.name, err)
	}
	p.jobWrites.Expect(writesGroup, string(j.uid), domain)
	return nil
}

// disruptPods deletes pods after marking them with a DisruptionTarget
// condition, as the pod disruption machinery does, so that pod failure
// policies can tell this from a failure of the workload.
func (p *Placer) disruptPods(acts *actions, j *placedJob, pods []*corev1.Pod, message string) {
	if len(pods) == 0 {
		return
	}
	if j.job != nil && p.recorder != nil {
		p.recorder.Eventf(j.job, nil, corev1.EventTypeWarning, reasonMisplacedPodsDisrupted, eventAction,
			"deleting %d pod(s): %s", len(pods), message)
	}
	for _, pod := range pods {
		gone := pod.DeepCopy()
		gone.DeletionTimestamp = ptr.To(metav1.NewTime(p.clock.Now()))
		p.expectPod(gone, func(cached *corev1.Pod) bool { return cached.DeletionTimestamp != nil })
		acts.add(func(ctx context.Context) error { return p.disruptPod(ctx, pod, message) })
	}
}

func (p *Placer) disruptPod(ctx context.Context, pod *corev1.Pod, message string) error {
	klog.FromContext(ctx).Info("Deleting misplaced pod", "pod", klog.KObj(pod), "reason", message)
	cond, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reasonMisplacedPodsDisrupted, Message: message, LastTransitionTime: metav1.NewTime(p.clock.Now()),
	}}}})
	if err != nil {
		return err
	}
	_, err = p.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, cond,
		metav1.PatchOptions{FieldManager: "jobset-controller"}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		uid := pod.UID
		err = p.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
	}
	if err != nil {
		p.podWrites.Drop(writesGroup, string(pod.UID))
		return fmt.Errorf("disrupting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
