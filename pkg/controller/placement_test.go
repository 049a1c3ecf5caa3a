package controller

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/placement"
)

const poolKey = "cloud.google.com/gke-nodepool"

// fakePlacer reports fixed waits.
type fakePlacer map[string]placement.Wait

func (fakePlacer) Run(context.Context, int) {}

func (f fakePlacer) WaitFor(key string) (placement.Wait, bool) {
	w, ok := f[key]
	return w, ok
}

func TestJobsOfExclusiveJobSetsAreGated(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		mode        batchv1.CompletionMode
		want        bool
	}{
		{"exclusive", map[string]string{jobset.ExclusiveKey: poolKey}, batchv1.IndexedCompletion, true},
		{"node-selector strategy", map[string]string{jobset.ExclusiveKey: poolKey, jobset.NodeSelectorStrategyKey: "true"}, batchv1.IndexedCompletion, false},
		{"not exclusive", nil, batchv1.IndexedCompletion, false},
		{"non-indexed", map[string]string{jobset.ExclusiveKey: poolKey}, batchv1.NonIndexedCompletion, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) { js.Annotations = tc.annotations })
			js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode = ptr.To(tc.mode)
			job := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[0], 0, jobParams{})
			tmpl := job.Spec.Template
			gatedTmpl := len(tmpl.Spec.SchedulingGates) == 1 && tmpl.Spec.SchedulingGates[0].Name == jobset.TopologyGate
			labelled := tmpl.Labels[jobset.ExclusivePlacementLabel] == "true"
			if gatedTmpl != tc.want || labelled != tc.want {
				t.Fatalf("gates %v, label %v; want gated and labelled: %v", tmpl.Spec.SchedulingGates, tmpl.Labels, tc.want)
			}
			if tc.want && tmpl.Annotations[jobset.ExclusiveKey] != poolKey {
				t.Fatalf("pod template annotations %v", tmpl.Annotations)
			}
		})
	}
}

func TestPlacementConditionOnJobSet(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) { js.Annotations = map[string]string{jobset.ExclusiveKey: poolKey} })
	fx := newFixture(t, js)
	fx.c.placer = fakePlacer{}
	fx.sync("js")
	if c := cond(fx.jobSet("js"), placement.ConditionPending); c != nil {
		t.Fatalf("condition before any wait: %+v", c)
	}
	fx.c.placer = fakePlacer{ns + "/js": {Reason: placement.ReasonWaitingForDomain, Message: "no free domain"}}
	fx.sync("js")
	wantCond(t, fx.jobSet("js"), placement.ConditionPending, metav1.ConditionTrue, placement.ReasonWaitingForDomain, "no free domain")
	fx.c.placer = fakePlacer{}
	fx.sync("js")
	wantCond(t, fx.jobSet("js"), placement.ConditionPending, metav1.ConditionFalse, placement.ReasonPlaced, placement.MessagePlaced)
	evs := strings.Join(fx.events(), "\n")
	if !strings.Contains(evs, placement.ReasonWaitingForDomain) || !strings.Contains(evs, placement.ReasonPlaced) {
		t.Fatalf("events:\n%s", evs)
	}
}
