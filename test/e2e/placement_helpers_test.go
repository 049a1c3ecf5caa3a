package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// labelPools labels nodes kwok-node-<first>..<first+count-1> with key, two
// nodes per value pool-0, pool-1, ..., and removes the labels at the end.
// Each test uses a key of its own, so tests running in parallel on the
// same nodes never see each other's domains.
func labelPools(t *testing.T, key string, first, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		node := fmt.Sprintf("kwok-node-%d", first+i)
		setNodeLabel(t, node, key, fmt.Sprintf("pool-%d", i/2))
		t.Cleanup(func() { removeNodeLabel(node, key) })
	}
}

func setNodeLabel(t *testing.T, node, key, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if _, err := cluster.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling node %s: %v", node, err)
	}
}

func removeNodeLabel(node, key string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
	_, _ = cluster.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{})
}

// exclusiveJobSet is a JobSet whose Jobs each want a domain of key.
func exclusiveJobSet(ns, name, key string, rjs ...v1alpha2.ReplicatedJob) *v1alpha2.JobSet {
	js := runningJobSet(ns, name, rjs...)
	js.Annotations = map[string]string{v1alpha2.ExclusiveKey: key}
	return js
}

// placement is where the live pods of some JobSets run: per Job, the
// domains (values of key) of their nodes.
type placement struct {
	domainsOf map[string]map[string]bool // Job name → domains
	running   map[string]int             // Job name → running pods
	recorded  map[string]string          // Job name → topology-domain annotation
	gated     int
}

func observePlacement(ctx context.Context, ns, key string, jobsets ...string) (*placement, error) {
	nodes, err := cluster.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	domain := map[string]string{}
	for _, n := range nodes.Items {
		domain[n.Name] = n.Labels[key]
	}
	pl := &placement{domainsOf: map[string]map[string]bool{}, running: map[string]int{}, recorded: map[string]string{}}
	for _, js := range jobsets {
		pods, err := podsOf(ctx, ns, js)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			job := p.Labels["batch.kubernetes.io/job-name"]
			if hasGate(&p) {
				pl.gated++
			}
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			if pl.domainsOf[job] == nil {
				pl.domainsOf[job] = map[string]bool{}
			}
			pl.domainsOf[job][domain[p.Spec.NodeName]] = true
			pl.running[job]++
		}
		jobs, err := childJobs(ctx, ns, js)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			if j.DeletionTimestamp == nil {
				pl.recorded[j.Name] = j.Annotations[v1alpha2.TopologyDomainKey]
			}
		}
	}
	return pl, nil
}

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == v1alpha2.TopologyGate {
			return true
		}
	}
	return false
}

// exclusive reports whether the Jobs run `pods` pods each, all pods of a
// Job in the one domain recorded on it, and no two Jobs share a domain.
// It returns what is wrong otherwise.
func (pl *placement) exclusive(jobs []string, pods int) string {
	owner := map[string]string{}
	for _, job := range jobs {
		if pl.running[job] != pods {
			return fmt.Sprintf("Job %s runs %d pods, want %d", job, pl.running[job], pods)
		}
		if len(pl.domainsOf[job]) != 1 {
			return fmt.Sprintf("Job %s runs in domains %v", job, keys(pl.domainsOf[job]))
		}
		d := keys(pl.domainsOf[job])[0]
		if d == "" {
			return fmt.Sprintf("Job %s runs on nodes without the label", job)
		}
		if pl.recorded[job] != d {
			return fmt.Sprintf("Job %s runs in %s but records %q", job, d, pl.recorded[job])
		}
		if other, taken := owner[d]; taken {
			return fmt.Sprintf("Jobs %s and %s share domain %s", other, job, d)
		}
		owner[d] = job
	}
	return ""
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitExclusive waits until the Jobs of the JobSets run exclusively, as
// exclusive() defines it.
func waitExclusive(t *testing.T, ns, key string, jobsets []string, jobs []string, pods int, timeout time.Duration) *placement {
	t.Helper()
	var last string
	var pl *placement
	eventually(t, timeout, fmt.Sprintf("Jobs %s to run %d pods each in domains of their own", strings.Join(jobs, ","), pods),
		func(ctx context.Context) (bool, error) {
			got, err := observePlacement(ctx, ns, key, jobsets...)
			if err != nil {
				return false, nil
			}
			pl = got
			last = got.exclusive(jobs, pods)
			return last == "", nil
		})
	if last != "" {
		t.Fatalf("placement: %s", last)
	}
	return pl
}

// jobNames lists <jobset>-<rj>-<i> for i < n.
func jobNames(jobset, rj string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s-%s-%d", jobset, rj, i))
	}
	return out
}

// ignoreDisruptions makes pods deleted by a placement repair not count as
// failures of the Job.
func ignoreDisruptions(rj v1alpha2.ReplicatedJob) v1alpha2.ReplicatedJob {
	rj.Template.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
		},
	}}}
	return rj
}
