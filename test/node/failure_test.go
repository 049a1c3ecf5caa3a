package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// A container's real exit code drives the Job's pod failure policy (exit 42:
// FailJob), and the JobSet's failure policy rule for that reason fails the
// JobSet at once, without the restarts maxRestarts would allow.
func TestExitCodeFailsJobSetThroughPolicies(t *testing.T) {
	ns := cluster.Namespace(t, "exit-code")
	apply(t, ns, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: exit42
spec:
  failurePolicy:
    maxRestarts: 3
    rules:
    - action: FailJobSet
      onJobFailureReasons: [PodFailurePolicy]
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        backoffLimit: 6
        podFailurePolicy:
          rules:
          - action: FailJob
            onExitCodes:
              operator: In
              values: [42]
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%s
            containers:
            - name: main
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", "sleep 1; exit 42"]
`, onRealNode, busyboxImage))
	js := waitCondition(t, ns, "exit42", v1alpha2.JobSetFailed, 3*time.Minute)
	if js.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0: the rule fails the JobSet without restarting it", js.Status.Restarts)
	}
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods, want the one whose exit code failed the Job", len(pods.Items))
	}
	if code := exitCode(pods.Items[0]); code != 42 {
		t.Errorf("the container's exit code is %d, want 42", code)
	}
}

func exitCode(p corev1.Pod) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated.ExitCode
		}
	}
	return -1
}

// A pod that exits 1 on the first attempt fails its Job; the JobSet's
// default rule restarts it by recreating the Jobs. The other pod ignores
// SIGTERM, so it holds on for its whole grace period: no new pod may run
// while an old pod with the same hostname still runs (two pods would answer
// to one DNS name), and the second attempt completes the JobSet.
func TestRecreateRestartNeverOverlapsHostnames(t *testing.T) {
	ns := cluster.Namespace(t, "recreate")
	w := watchPods(t, ns)
	apply(t, ns, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: recreate
spec:
  failurePolicy:
    maxRestarts: 2
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 5%s
            containers:
            - name: main
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", %q]
              env:
              - name: ATTEMPT
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.labels['jobset.sigs.k8s.io/restart-attempt']
`, onRealNode, busyboxImage, `trap '' TERM
if [ "$ATTEMPT" = 0 ]; then
  if [ "$JOB_COMPLETION_INDEX" = 0 ]; then sleep 3; exit 1; fi
  while :; do sleep 1; done
fi
sleep 2`))
	js := waitCondition(t, ns, "recreate", v1alpha2.JobSetCompleted, 4*time.Minute)
	if js.Status.Restarts != 1 {
		t.Errorf("status.restarts = %d, want 1", js.Status.Restarts)
	}
	w.stop()
	if len(w.overlaps) > 0 {
		t.Errorf("new pods ran beside old pods of the same hostname:\n%v", w.overlaps)
	}
	if w.running < 4 {
		t.Errorf("saw %d pods running, want 4 (two attempts of two pods)", w.running)
	}
	if !w.sawExit1 {
		t.Error("never saw the failing container's exit code 1")
	}
}

// podWatch follows a namespace's pods in the order the API server reports
// changes and records every moment a pod runs while another attempt's pod
// with the same hostname still runs (its phase not yet Succeeded or Failed).
type podWatch struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	overlaps []string
	running  int
	sawExit1 bool
}

func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wi, err := cluster.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &podWatch{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(w.stop)
	go func() {
		defer close(w.done)
		defer wi.Stop()
		live := map[string]*corev1.Pod{} // by UID
		seenRunning := map[string]bool{}
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			w.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(live, string(p.UID))
			} else {
				live[string(p.UID)] = p
				if exitCode(*p) == 1 {
					w.sawExit1 = true
				}
				if isRunning(p) && !seenRunning[string(p.UID)] {
					seenRunning[string(p.UID)] = true
					w.running++
					for _, o := range live {
						// The kubelet gives an old pod its final phase only once its
						// containers have stopped.
						stillRuns := o.Status.Phase != corev1.PodSucceeded && o.Status.Phase != corev1.PodFailed
						if o.UID != p.UID && o.Spec.Hostname == p.Spec.Hostname && stillRuns &&
							o.Labels["jobset.sigs.k8s.io/restart-attempt"] != p.Labels["jobset.sigs.k8s.io/restart-attempt"] {
							w.overlaps = append(w.overlaps, fmt.Sprintf("%s (attempt %s) running while %s (attempt %s) is %s",
								p.Name, p.Labels["jobset.sigs.k8s.io/restart-attempt"], o.Name, o.Labels["jobset.sigs.k8s.io/restart-attempt"], o.Status.Phase))
						}
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *podWatch) stop() {
	w.cancel()
	<-w.done
}

func isRunning(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil {
			return true
		}
	}
	return false
}
