package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

const (
	imageV1 = "registry.k8s.io/pause:3.10"
	imageV2 = "registry.k8s.io/pause:3.9"
)

// updatableJobSet is a JobSet of two running single-pod Jobs with the given
// update strategy and room for two counted restarts.
func updatableJobSet(ns, name string, strategy v1alpha2.UpdateStrategy) *v1alpha2.JobSet {
	js := runningJobSet(ns, name, replicatedJob("workers", 2, 1, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2}
	if strategy != "" {
		js.Spec.UpdatePolicy = &v1alpha2.UpdatePolicy{UpdateStrategy: strategy}
	}
	return js
}

// setImage patches the image of the workers' template with kubectl.
func setImage(ns, name, image string) (string, error) {
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/replicatedJobs/0/template/spec/template/spec/containers/0/image","value":%q}]`, image)
	return kubectlErr("patch", "jobset", name, "-n", ns, "--type=json", "-p", patch)
}

// revisionsOf lists the ControllerRevisions of a JobSet, oldest first.
func revisionsOf(ctx context.Context, ns, name string) ([]appsv1.ControllerRevision, error) {
	list, err := cluster.kube.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha2.JobSetNameKey + "=" + name})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Revision < list.Items[j].Revision })
	return list.Items, nil
}

func revisionNames(crs []appsv1.ControllerRevision) []string {
	var out []string
	for _, cr := range crs {
		out = append(out, cr.Name)
	}
	return out
}

// waitRevisions waits until the JobSet records a current revision and an
// update revision that satisfy cond.
func waitRevisions(t *testing.T, ns, name, what string, cond func(current, update string) bool) *v1alpha2.JobSet {
	t.Helper()
	return waitStatus(t, ns, name, what, 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.UpdateRevision != "" && cond(js.Status.CurrentRevision, js.Status.UpdateRevision)
	})
}

// checkAttemptBuiltFrom waits for the Jobs of a restart attempt and checks
// that they and their pods carry the revision and run the image.
func checkAttemptBuiltFrom(t *testing.T, ns, name, attempt, revision, image string) []batchv1.Job {
	t.Helper()
	jobs := waitJobs(t, ns, name, 2, attempt)
	for _, j := range jobs {
		if got := j.Annotations[v1alpha2.TemplateRevisionKey]; got != revision {
			t.Errorf("Job %s template-revision = %q, want %q", j.Name, got, revision)
		}
		if got := j.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("Job %s image = %q, want %q", j.Name, got, image)
		}
	}
	eventually(t, 2*time.Minute, "the pods of attempt "+attempt+" to carry "+revision, func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, ns, name)
		if err != nil {
			return false, nil
		}
		n := 0
		for _, p := range pods {
			if p.Labels[v1alpha2.RestartsKey] != attempt {
				continue
			}
			if p.Annotations[v1alpha2.TemplateRevisionKey] != revision || p.Spec.Containers[0].Image != image {
				return false, fmt.Errorf("pod %s: template-revision %q image %q", p.Name, p.Annotations[v1alpha2.TemplateRevisionKey], p.Spec.Containers[0].Image)
			}
			n++
		}
		return n == 2, nil
	})
	return jobs
}

func updatePending(js *v1alpha2.JobSet) metav1.ConditionStatus {
	c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetUpdatePending))
	if c == nil {
		return ""
	}
	return c.Status
}

func TestUpdateOpportunistic(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	createJobSet(t, updatableJobSet(ns, "opp", v1alpha2.UpdateOpportunistic))
	js := waitRevisions(t, ns, "opp", "a first revision", func(c, u string) bool { return c == u })
	r1 := js.Status.CurrentRevision
	first := checkAttemptBuiltFrom(t, ns, "opp", "0", r1, imageV1)
	uids := map[types.UID]bool{}
	for _, j := range first {
		uids[j.UID] = true
	}

	if out, err := setImage(ns, "opp", imageV2); err != nil {
		t.Fatalf("changing the image: %v\n%s", err, out)
	}
	js = waitRevisions(t, ns, "opp", "a pending update", func(c, u string) bool { return c == r1 && u != r1 })
	r2 := js.Status.UpdateRevision
	js = waitStatus(t, ns, "opp", "UpdatePending", time.Minute, func(js *v1alpha2.JobSet) bool {
		return updatePending(js) == metav1.ConditionTrue
	})
	if c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetUpdatePending)); !strings.Contains(c.Message, r1) || !strings.Contains(c.Message, r2) {
		t.Errorf("UpdatePending message %q does not name %s and %s", c.Message, r1, r2)
	}
	crs, err := revisionsOf(ctx, ns, "opp")
	if err != nil || len(crs) != 2 || crs[1].Name != r2 {
		t.Fatalf("ControllerRevisions = %v (err %v), want [%s %s]", revisionNames(crs), err, r1, r2)
	}
	waitEvent(t, ns, "opp", "TemplateRevisionAccepted")
	// The running Jobs are untouched.
	jobs, err := childJobs(ctx, ns, "opp")
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Jobs after the edit: %d (err %v)", len(jobs), err)
	}
	for _, j := range jobs {
		if !uids[j.UID] || j.Spec.Template.Spec.Containers[0].Image != imageV1 || j.DeletionTimestamp != nil {
			t.Errorf("Job %s changed by an Opportunistic edit (image %s)", j.Name, j.Spec.Template.Spec.Containers[0].Image)
		}
	}

	// A failure restart rolls the update out.
	failOnePod(t, ns, "opp-workers-0")
	checkAttemptBuiltFrom(t, ns, "opp", "1", r2, imageV2)
	js = waitStatus(t, ns, "opp", "the update rolled out", time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.CurrentRevision == r2 && updatePending(js) == metav1.ConditionFalse
	})
	if js.Status.UpdateRevision != r2 || js.Status.Restarts != 1 || js.Status.RestartsCountTowardsMax != 1 {
		t.Errorf("status after the restart: %+v", js.Status)
	}
	waitEvent(t, ns, "opp", "TemplateRevisionRolledOut")
}

func TestUpdateImmediate(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, updatableJobSet(ns, "imm", v1alpha2.UpdateImmediate))
	js := waitRevisions(t, ns, "imm", "a first revision", func(c, u string) bool { return c == u })
	r1 := js.Status.CurrentRevision
	waitJobs(t, ns, "imm", 2, "0")

	if out, err := setImage(ns, "imm", imageV2); err != nil {
		t.Fatalf("changing the image: %v\n%s", err, out)
	}
	// The restart starts at once and does not count toward maxRestarts.
	js = waitRevisions(t, ns, "imm", "the update applied", func(c, u string) bool { return c == u && c != r1 })
	r2 := js.Status.CurrentRevision
	if js.Status.Restarts != 1 || js.Status.RestartsCountTowardsMax != 0 {
		t.Errorf("restarts %d, towards max %d; want 1 and 0", js.Status.Restarts, js.Status.RestartsCountTowardsMax)
	}
	c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetRestarting))
	if c == nil || (c.Status == metav1.ConditionTrue && (c.Reason != "TemplateUpdate" || !strings.Contains(c.Message, "not counted toward maxRestarts"))) {
		t.Errorf("RestartingJobSet = %+v, want reason TemplateUpdate", c)
	}
	waitEvent(t, ns, "imm", "TemplateUpdate")
	checkAttemptBuiltFrom(t, ns, "imm", "1", r2, imageV2)
	if js := getJobSet(t, ns, "imm"); updatePending(js) == metav1.ConditionTrue {
		t.Errorf("UpdatePending still true")
	}
}

func TestUpdateNeverRejectsTemplateEdits(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, updatableJobSet(ns, "frozen", ""))
	js := waitRevisions(t, ns, "frozen", "a first revision", func(c, u string) bool { return c == u })
	waitJobs(t, ns, "frozen", 2, "0")
	out, err := setImage(ns, "frozen", imageV2)
	if err == nil || !strings.Contains(out, "spec.replicatedJobs[0].template.spec.template.spec.containers") || !strings.Contains(out, "field is immutable") {
		t.Fatalf("image change under Never: err %v, output %s", err, out)
	}
	if got := getJobSet(t, ns, "frozen"); got.Generation != js.Generation || got.Status.UpdateRevision != js.Status.UpdateRevision {
		t.Errorf("a rejected edit changed the JobSet")
	}
	// Every child Job still names the revision it was built from.
	checkAttemptBuiltFrom(t, ns, "frozen", "0", js.Status.CurrentRevision, imageV1)
}

func TestUpdateWhileSuspendedAppliedAtResume(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createJobSet(t, updatableJobSet(ns, "paused", v1alpha2.UpdateOpportunistic))
	js := waitRevisions(t, ns, "paused", "a first revision", func(c, u string) bool { return c == u })
	r1 := js.Status.CurrentRevision
	waitJobs(t, ns, "paused", 2, "0")

	suspendAndWait(t, ns, "paused", 2)
	if out, err := setImage(ns, "paused", imageV2); err != nil {
		t.Fatalf("changing the image while suspended: %v\n%s", err, out)
	}
	js = waitRevisions(t, ns, "paused", "a pending update", func(c, u string) bool { return c == r1 && u != r1 })
	r2 := js.Status.UpdateRevision

	kubectl(t, "patch", "jobset", "paused", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	jobs := checkAttemptBuiltFrom(t, ns, "paused", "1", r2, imageV2)
	for _, j := range jobs {
		if ptr.Deref(j.Spec.Suspend, false) {
			t.Errorf("Job %s still suspended after the resume", j.Name)
		}
	}
	js = waitStatus(t, ns, "paused", "the update adopted", time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.CurrentRevision == r2 && updatePending(js) == metav1.ConditionFalse
	})
	if js.Status.RestartsCountTowardsMax != 0 || ptr.Deref(js.Status.ExecutionAttempts, 0) != 1 {
		t.Errorf("after the resume: towards max %d, execution attempts %d; want 0 and 1", js.Status.RestartsCountTowardsMax, ptr.Deref(js.Status.ExecutionAttempts, 0))
	}
}

func TestUpdateRevisionHistoryAndRollback(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	js := updatableJobSet(ns, "history", v1alpha2.UpdateOpportunistic)
	js.Spec.UpdatePolicy.RevisionHistoryLimit = ptr.To[int32](3)
	createJobSet(t, js)
	js = waitRevisions(t, ns, "history", "a first revision", func(c, u string) bool { return c == u })
	r1 := js.Status.CurrentRevision
	waitJobs(t, ns, "history", 2, "0")

	images := []string{"registry.k8s.io/pause:3.1", "registry.k8s.io/pause:3.2", "registry.k8s.io/pause:3.3"}
	revs := []string{r1}
	for _, img := range images {
		prev := revs[len(revs)-1]
		if out, err := setImage(ns, "history", img); err != nil {
			t.Fatalf("setting %s: %v\n%s", img, err, out)
		}
		js = waitRevisions(t, ns, "history", "a revision for "+img, func(c, u string) bool { return u != prev })
		revs = append(revs, js.Status.UpdateRevision)
	}
	// Kept: the current revision (nothing restarted), the update revision
	// and the newest other one; the oldest edit is pruned.
	want := []string{r1, revs[2], revs[3]}
	eventually(t, time.Minute, fmt.Sprintf("revisions %v", want), func(ctx context.Context) (bool, error) {
		crs, err := revisionsOf(ctx, ns, "history")
		return err == nil && strings.Join(revisionNames(crs), ",") == strings.Join(want, ","), nil
	})

	// Re-applying an older template gives its revision back, as the newest.
	if out, err := setImage(ns, "history", images[1]); err != nil {
		t.Fatalf("rolling back: %v\n%s", err, out)
	}
	waitRevisions(t, ns, "history", "the rolled-back revision", func(c, u string) bool { return u == revs[2] })
	eventually(t, time.Minute, "the rolled-back revision to be the newest", func(ctx context.Context) (bool, error) {
		crs, err := revisionsOf(ctx, ns, "history")
		return err == nil && len(crs) == 3 && crs[2].Name == revs[2], nil
	})
	// And the original template is the current revision: nothing pending.
	if out, err := setImage(ns, "history", imageV1); err != nil {
		t.Fatalf("rolling back to the original: %v\n%s", err, out)
	}
	js = waitStatus(t, ns, "history", "no pending update", time.Minute, func(js *v1alpha2.JobSet) bool {
		return js.Status.UpdateRevision == r1 && updatePending(js) == metav1.ConditionFalse
	})
	if crs, err := revisionsOf(ctx, ns, "history"); err != nil || len(crs) > 3 {
		t.Errorf("revisions after the rollbacks: %v (err %v)", revisionNames(crs), err)
	}
}
