package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// hostTracker follows the pods of a namespace through one watch (one
// ordered stream of changes) and reports any pod that became Running while
// a pod of an earlier attempt with the same hostname had not yet finished.
type hostTracker struct {
	mu         sync.Mutex
	pods       map[string]*trackedPod // by pod name
	violations []string
	runningOf  map[string]int // attempt → pods seen Running
}

type trackedPod struct {
	hostname string
	attempt  string
	running  bool // phase Running: its containers may run
}

func (h *hostTracker) update(typ watch.EventType, p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := h.pods[p.Name]
	if tp == nil {
		tp = &trackedPod{hostname: p.Spec.Hostname, attempt: p.Labels[v1alpha2.RestartsKey]}
		h.pods[p.Name] = tp
	}
	wasRunning := tp.running
	tp.running = typ != watch.Deleted && p.Status.Phase == corev1.PodRunning
	if !tp.running || wasRunning {
		return
	}
	h.runningOf[tp.attempt]++
	for name, other := range h.pods {
		if name != p.Name && other.hostname == tp.hostname && other.attempt < tp.attempt && other.running {
			h.violations = append(h.violations, p.Name+" (attempt "+tp.attempt+") started while "+name+" (attempt "+other.attempt+") still ran as "+tp.hostname)
		}
	}
}

// TestRestartNeverOverlapsHostnames: when a JobSet restarts, no pod of the
// new attempt runs while a pod of the old attempt with the same hostname
// still runs, for both restart strategies.
func TestRestartNeverOverlapsHostnames(t *testing.T) {
	t.Parallel()
	for _, strategy := range []v1alpha2.JobSetRestartStrategy{v1alpha2.Recreate, v1alpha2.BlockingRecreate} {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			rj := replicatedJob("workers", 3, 2, "")
			rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			js := runningJobSet(ns, "hosts", rj)
			js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 2, RestartStrategy: strategy}
			createJobSet(t, js)
			waitJobs(t, ns, "hosts", 3, "0")

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := &hostTracker{pods: map[string]*trackedPod{}, runningOf: map[string]int{}}
			var list *corev1.PodList
			eventually(t, 2*time.Minute, "the 6 pods of attempt 0 to run", func(ctx context.Context) (bool, error) {
				var err error
				list, err = cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, nil
				}
				running := 0
				for i := range list.Items {
					if list.Items[i].Status.Phase == corev1.PodRunning {
						running++
					}
				}
				return running == 6, nil
			})
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.Hostname == "" {
					t.Fatalf("pod %s has no hostname", p.Name)
				}
				h.update(watch.Added, p)
			}
			w, err := cluster.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			go func() {
				for ev := range w.ResultChan() {
					if p, ok := ev.Object.(*corev1.Pod); ok {
						h.update(ev.Type, p)
					}
				}
			}()

			failPodWithCode(t, ns, "hosts-workers-1", otherExitCode)
			eventually(t, 2*time.Minute, "the 6 pods of attempt 1 to run", func(context.Context) (bool, error) {
				h.mu.Lock()
				defer h.mu.Unlock()
				return h.runningOf["1"] == 6, nil
			})
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, v := range h.violations {
				t.Error(v)
			}
		})
	}
}
