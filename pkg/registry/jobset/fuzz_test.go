package jobset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/apis/jobset/validation"
)

// FuzzJobSetUpdate drives the update path of the registry with an old and
// a new JobSet that differ: the old one is decoded, prepared and validated
// as a create; the new one is either decoded from the second input or
// derived from the old one by the edits the third input selects. The
// strategy's PrepareForUpdate and ValidateUpdate must not panic, every error
// must name a field, and an update they accept must leave a JobSet that
// passes create validation: no invalid object is stored through an update.
func FuzzJobSetUpdate(f *testing.F) {
	seeds := seedFiles(f)
	for _, old := range seeds {
		for i, nu := range seeds {
			f.Add(old, nu, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
		}
		for _, edits := range acceptedEdits {
			f.Add(old, old, edits)
		}
	}
	u := newUpdateChecker()
	f.Fuzz(func(t *testing.T, oldData, newData, edits []byte) {
		u.check(t, oldData, newData, edits)
	})
}

// acceptedEdits are edit seeds that validation accepts on the seed JobSets,
// so that the fuzzer starts from updates that reach the "still valid" check:
// labels and annotations, suspend, and while suspended the pod template's
// image and node selector.
var acceptedEdits = [][]byte{
	{12, 7},
	{0, 0},
	{0, 0, 5, 3},
	{0, 0, 4, 9},
}

// TestUpdateSeedsReachAcceptedUpdates: the seeds of FuzzJobSetUpdate are
// not all rejected, so the check on accepted updates runs on them.
func TestUpdateSeedsReachAcceptedUpdates(t *testing.T) {
	u := newUpdateChecker()
	accepted := 0
	for _, old := range seedFiles(t) {
		for _, edits := range acceptedEdits {
			accepted += u.check(t, old, nil, edits)
		}
	}
	if accepted == 0 {
		t.Fatal("no seed edit was accepted: the fuzzer's seeds never reach the check on accepted updates")
	}
	t.Logf("%d seed edits accepted", accepted)
}

type updateChecker struct {
	dec      *install.JobSetDecoder
	strategy jobSetStrategy
	ctx      context.Context
}

func newUpdateChecker() *updateChecker {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return &updateChecker{
		dec:      install.NewJobSetDecoder(),
		strategy: NewStrategy(scheme),
		ctx:      genericapirequest.WithNamespace(context.Background(), "default"),
	}
}

// check runs one update and returns how many of the candidates derived by
// the edits were accepted (0 or 1).
func (u *updateChecker) check(t *testing.T, oldData, newData, edits []byte) int {
	old, err := decode(u.dec, oldData)
	if err != nil {
		return 0
	}
	u.strategy.PrepareForCreate(u.ctx, old)
	if errs := u.strategy.Validate(u.ctx, old); len(errs) > 0 {
		return 0
	}
	old.ResourceVersion = "1"
	candidates := []*jobset.JobSet{edit(old, edits)}
	if nu, err := decode(u.dec, newData); err == nil {
		nu.Name, nu.Namespace = old.Name, old.Namespace
		candidates = append(candidates, nu)
	}
	accepted := 0
	for i, nu := range candidates {
		nu.ResourceVersion = old.ResourceVersion
		u.strategy.PrepareForUpdate(u.ctx, nu, old)
		errs := u.strategy.ValidateUpdate(u.ctx, nu, old)
		checkPaths(t, errs)
		if len(errs) > 0 {
			continue
		}
		if i == 0 {
			accepted++
		}
		if created := validation.ValidateJobSet(nu); len(created) > 0 {
			t.Errorf("an update was accepted that leaves an invalid JobSet: %v", created)
		}
	}
	return accepted
}

// edit applies the edits the bytes select to a copy of js, two bytes per
// edit (which, and a value), over the fields users change most.
func edit(js *jobset.JobSet, ops []byte) *jobset.JobSet {
	out := js.DeepCopy()
	for i := 0; i+1 < len(ops); i += 2 {
		op, v := ops[i], ops[i+1]
		n := len(out.Spec.ReplicatedJobs)
		var rj *jobset.ReplicatedJob
		if n > 0 {
			rj = &out.Spec.ReplicatedJobs[int(v)%n]
		}
		switch op % 14 {
		case 0:
			out.Spec.Suspend = ptr.To(v%2 == 0)
		case 1:
			if rj != nil {
				rj.Replicas = int32(v) - 8
			}
		case 2:
			if rj != nil {
				rj.Template.Spec.Parallelism = ptr.To(int32(v) - 8)
			}
		case 3:
			if rj != nil {
				rj.Template.Spec.Completions = ptr.To(int32(v) - 8)
			}
		case 4:
			if rj != nil && len(rj.Template.Spec.Template.Spec.Containers) > 0 {
				rj.Template.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("image:%d", v)
			}
		case 5:
			if rj != nil {
				rj.Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": fmt.Sprint(v)}
			}
		case 6:
			strategies := []jobset.UpdateStrategy{jobset.UpdateNever, jobset.UpdateOpportunistic, jobset.UpdateImmediate, "Bogus"}
			out.Spec.UpdatePolicy = &jobset.UpdatePolicy{UpdateStrategy: strategies[int(v)%len(strategies)]}
		case 7:
			if n > 0 {
				out.Spec.ReplicatedJobs = out.Spec.ReplicatedJobs[:n-1]
			}
		case 8:
			if rj != nil {
				out.Spec.ReplicatedJobs = append(out.Spec.ReplicatedJobs, *rj.DeepCopy())
			}
		case 9:
			if rj != nil {
				rj.Name = fmt.Sprintf("rj-%d", v)
			}
		case 10:
			if rj != nil {
				mode := []batchv1.CompletionMode{batchv1.IndexedCompletion, batchv1.NonIndexedCompletion}[v%2]
				rj.Template.Spec.CompletionMode = &mode
			}
		case 11:
			if out.Spec.FailurePolicy == nil {
				out.Spec.FailurePolicy = &jobset.FailurePolicy{}
			}
			out.Spec.FailurePolicy.MaxRestarts = int32(v) - 8
		case 12:
			out.Labels = map[string]string{"l": fmt.Sprint(v)}
			out.Annotations = map[string]string{"a": fmt.Sprint(v)}
		case 13:
			// A status the server would never take through the main
			// resource: the strategy must keep the old one.
			out.Status.TerminalState = string(jobset.JobSetCompleted)
			out.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue}}
		}
	}
	return out
}

func seedFiles(tb testing.TB) [][]byte {
	tb.Helper()
	out, err := readSeeds()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func readSeeds() ([][]byte, error) {
	var files []string
	for _, dir := range []string{
		filepath.Join("..", "..", "apis", "jobset", "validation", "testdata", "seed"),
		filepath.Join("testdata", "seed"),
	} {
		m, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no seed corpus")
	}
	var out [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return out, nil
}

// decode does what the API server does with a body (decode, default,
// convert), then names the JobSet as a create request would.
func decode(dec *install.JobSetDecoder, data []byte) (*jobset.JobSet, error) {
	js, err := dec.Decode(data)
	if err != nil {
		return nil, err
	}
	if js.Namespace == "" {
		js.Namespace = "default"
	}
	if js.Name == "" {
		js.Name = "fuzz"
	}
	return js, nil
}

func checkPaths(t *testing.T, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" || e.Field == "<nil>" {
			t.Errorf("an error without a field path: %v", e)
		}
	}
}
