package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/localcluster"
)

// kwok fails a pod with this label (hack/local/kwok/stages.yaml).
const failLabel = "pod-fail.stage.kwok.x-k8s.io"

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	localcluster.Eventually(t, timeout, what, cond)
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, name string) string {
	t.Helper()
	return cl.Namespace(t, name)
}

// jobSet builds a JobSet of one Indexed replicatedJob "w" with `replicas`
// Jobs of `pods` pods each that run until told to fail.
func jobSet(ns, name string, replicas, pods int32) *v1alpha2.JobSet {
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name:     "w",
			Replicas: ptr.To(replicas),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism:    ptr.To(pods),
				Completions:    ptr.To(pods),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				BackoffLimit:   ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				}},
			}},
		}}},
	}
}

// leader returns the controller component holding the leader Lease, with
// its identity. The identity is found in the component's log ("Became
// leader"), since it is the host name and a random UUID.
func leader(ctx context.Context) (component, identity string, err error) {
	lease, err := cl.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "jobset-controller", metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	identity = ptr.Deref(lease.Spec.HolderIdentity, "")
	if identity == "" {
		return "", "", fmt.Errorf("the lease has no holder")
	}
	for _, c := range controllers {
		data, err := os.ReadFile(filepath.Join(cl.LocalDir, "logs", c+".log"))
		if err == nil && strings.Contains(string(data), identity) {
			return c, identity, nil
		}
	}
	return "", identity, fmt.Errorf("no controller log names the holder %q", identity)
}

// liveLeader waits until a running controller holds the Lease with an
// identity other than `not`, and returns it with the time it was seen.
func liveLeader(t testing.TB, not string, timeout time.Duration) (*localcluster.Process, string, time.Time) {
	t.Helper()
	var p *localcluster.Process
	var id string
	eventually(t, timeout, "a running controller to hold the lease", func(ctx context.Context) (bool, error) {
		if !anyRunning(controllers) {
			// Both gone (one may give up after missing its renew deadline
			// on a loaded machine): start them, as a ReplicaSet would.
			revive(t, "no controller running")
		}
		c, holder, err := leader(ctx)
		if err != nil || holder == not {
			return false, nil
		}
		proc, err := cl.Process(c)
		if err != nil {
			return false, nil
		}
		p, id = proc, holder
		return true, nil
	})
	return p, id, time.Now()
}

// kill sends SIGKILL to a component and waits until it is gone.
func kill(t *testing.T, component string) *localcluster.Process {
	t.Helper()
	p, err := cl.Process(component)
	if err != nil {
		t.Fatalf("%s: %v", component, err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	return p
}

// revive starts every restartable component that is not running (killed,
// or a controller that gave up after losing its lease), as a ReplicaSet
// would, and returns the ones it started.
func revive(t testing.TB, why string) []string {
	t.Helper()
	var started []string
	for _, name := range restartable {
		if _, err := cl.Process(name); err == nil {
			continue
		}
		if _, err := cl.Restart(templates[name], why); err != nil {
			t.Fatalf("restarting %s: %v", name, err)
		}
		started = append(started, name)
	}
	return started
}

// jobLedger follows every Job of a namespace with a watch that resumes
// across disconnects, and records the UIDs seen per Job name and restart
// attempt: two UIDs for one name and attempt is a Job created twice.
type jobLedger struct {
	mu     sync.Mutex
	uids   map[string]map[types.UID]bool // "<name>@<attempt>" -> UIDs
	seen   int
	cancel context.CancelFunc
	done   chan struct{}
}

func watchJobLedger(t *testing.T, ns string) *jobLedger {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &jobLedger{uids: map[string]map[types.UID]bool{}, cancel: cancel, done: make(chan struct{})}
	list, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Jobs: %v", err)
	}
	for i := range list.Items {
		l.add(&list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cl.Kube.BatchV1().Jobs(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatalf("watching Jobs: %v", err)
	}
	go func() {
		defer close(l.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if j, ok := ev.Object.(*batchv1.Job); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					l.add(j)
				}
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *jobLedger) add(j *batchv1.Job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := j.Name + "@" + j.Labels[v1alpha2.RestartsKey]
	if l.uids[key] == nil {
		l.uids[key] = map[types.UID]bool{}
	}
	if !l.uids[key][j.UID] {
		l.uids[key][j.UID] = true
		l.seen++
	}
}

func (l *jobLedger) stop() {
	l.cancel()
	<-l.done
}

// count returns how many distinct Jobs were seen, and how many of them
// belong to the restart attempt.
func (l *jobLedger) count(attempt string) (all, ofAttempt int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, uids := range l.uids {
		if strings.HasSuffix(key, "@"+attempt) {
			ofAttempt += len(uids)
		}
	}
	return l.seen, ofAttempt
}

// duplicates lists every Job name and attempt that was created more than once.
func (l *jobLedger) duplicates() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for key, uids := range l.uids {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s created %d times", key, len(uids)))
		}
	}
	return out
}

// failPod labels one running pod of the Job so that kwok fails it.
func failPod(ctx context.Context, ns, job string) (bool, error) {
	pods, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return false, nil
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, failLabel)
			_, err := cl.Kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err == nil, nil
		}
	}
	return false, nil
}

func waitPoll(timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, cond)
}

// anyRunning reports whether one of the components runs.
func anyRunning(components []string) bool {
	for _, c := range components {
		if _, err := cl.Process(c); err == nil {
			return true
		}
	}
	return false
}
