package controller

import (
	"context"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Pod priority, without a pod webhook: the controller resolves, when it
// builds a Job, the priority the Priority admission plugin will give the
// Job's pods (the template's priority, else the value of its
// priorityClassName, else the cluster's global default class, else 0) and
// writes it as a label of the pod template.

// podPriority resolves the priority of pods made from spec; false when
// the template names a PriorityClass that is not in the cache, in which
// case the pods get no label rather than a wrong one.
func podPriority(lister schedulinglisters.PriorityClassLister, spec *corev1.PodSpec) (int32, bool) {
	if spec.Priority != nil {
		return *spec.Priority, true
	}
	if lister == nil {
		return 0, spec.PriorityClassName == ""
	}
	if name := spec.PriorityClassName; name != "" {
		pc, err := lister.Get(name)
		if err != nil {
			return 0, false
		}
		return pc.Value, true
	}
	classes, err := lister.List(labels.Everything())
	if err != nil {
		return 0, true
	}
	// As the admission plugin: the global default with the lowest value.
	var value int32
	found := false
	for _, pc := range classes {
		if pc.GlobalDefault && (!found || pc.Value < value) {
			value, found = pc.Value, true
		}
	}
	return value, true
}

// priorityLabelValue writes a priority as a label value: a label value
// cannot start with "-", so a negative priority is written "n<magnitude>".
func priorityLabelValue(priority int32) string {
	if priority < 0 {
		return "n" + strconv.FormatInt(-int64(priority), 10)
	}
	return strconv.FormatInt(int64(priority), 10)
}

// applyPriorityLabel labels the pod template of job with its priority,
// except under the node-selector placement strategy, as upstream.
func applyPriorityLabel(job *batchv1.Job, priority *int32) {
	if priority == nil {
		return
	}
	if _, strategy := job.Annotations[jobset.NodeSelectorStrategyKey]; strategy {
		return
	}
	job.Spec.Template.Labels = mergeInto(job.Spec.Template.Labels, map[string]string{jobset.PriorityKey: priorityLabelValue(*priority)})
}

// priorityOf is the priority of the pods of rj's Jobs, or nil if unknown.
// A class missing from the cache (created a moment ago) is read from the
// API server once per Job creation.
func (c *Controller) priorityOf(ctx context.Context, rj *jobset.ReplicatedJob) *int32 {
	spec := &rj.Template.Spec.Template.Spec
	if p, ok := podPriority(c.pcLister, spec); ok {
		return &p
	}
	if spec.PriorityClassName == "" || c.kube == nil {
		return nil
	}
	pc, err := c.kube.SchedulingV1().PriorityClasses().Get(ctx, spec.PriorityClassName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return &pc.Value
}
