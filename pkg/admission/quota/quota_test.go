package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// JobSets count one each under the name kube-controller-manager uses;
// replicatedjobs, a view of JobSets, is ignored; and asking the evaluator
// for usage is an error, not a panic.
func TestConfiguration(t *testing.T) {
	c := Configuration()
	if _, ok := c.IgnoredResources()[jobset.Resource("replicatedjobs")]; !ok {
		t.Errorf("replicatedjobs not ignored: %v", c.IgnoredResources())
	}
	if len(c.Evaluators()) != 1 {
		t.Fatalf("evaluators: %d, want 1", len(c.Evaluators()))
	}
	e := c.Evaluators()[0]
	if e.GroupResource() != jobset.Resource("jobsets") {
		t.Errorf("evaluator for %v, want jobsets", e.GroupResource())
	}
	usage, err := e.Usage(&jobset.JobSet{})
	if err != nil {
		t.Fatal(err)
	}
	count := usage[corev1.ResourceName("count/jobsets.jobset.x-k8s.io")]
	if count.Value() != 1 || len(usage) != 1 {
		t.Errorf("usage of a JobSet = %v, want count/jobsets.jobset.x-k8s.io=1", usage)
	}
	if _, err := e.UsageStats(quotav1.UsageStatsOptions{Namespace: "ns"}); err == nil {
		t.Error("UsageStats: want an error (kube-controller-manager computes usage)")
	}
}
