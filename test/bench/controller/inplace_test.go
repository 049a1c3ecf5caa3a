package controller

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
)

// podAgents runs one in-place agent per pod in this process (kwok runs no
// containers), restarting it as the kubelet would restart its container:
// through the kwok in-place restart stage.
type podAgents struct {
	kube kubernetes.Interface
	js   versioned.Interface
	ns   string
	ctx  context.Context

	mu      sync.Mutex
	running map[string]context.CancelFunc
}

func newPodAgents(ctx context.Context, ns string) *podAgents {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return &podAgents{kube: kubernetes.NewForConfigOrDie(cfg), js: versioned.NewForConfigOrDie(cfg), ns: ns, ctx: ctx,
		running: map[string]context.CancelFunc{}}
}

// start runs the agent of a pod: run, restart in place when told, again.
func (a *podAgents) start(pod, jobSet string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[pod] != nil {
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	a.running[pod] = cancel
	cfg := inplaceagent.Config{Namespace: a.ns, PodName: pod, JobSet: jobSet, RestartExitCode: 1,
		LiftBarrier: func() {}, Logf: func(string, ...any) {}}
	go func() {
		for ctx.Err() == nil {
			code := inplaceagent.New(cfg, a.kube, a.js).Run(ctx)
			if ctx.Err() != nil {
				return
			}
			_ = inplaceagent.SignalExit(ctx, a.kube, a.ns, pod, code)
		}
	}()
}

// crash makes the pod's workload fail: its containers restart in place and
// its agent starts over.
func (a *podAgents) crash(pod, jobSet string) error {
	a.mu.Lock()
	if cancel := a.running[pod]; cancel != nil {
		cancel()
	}
	delete(a.running, pod)
	a.mu.Unlock()
	if err := inplaceagent.SignalExit(a.ctx, a.kube, a.ns, pod, 3); err != nil {
		return err
	}
	a.start(pod, jobSet)
	return nil
}

// BenchmarkInPlaceRestart: in one op, G JobSets of M Jobs (one pod each)
// run, one pod of each fails at once, and the time until every JobSet runs
// its workload again is measured twice in the same op:
//
//   - Recreate: the failed pod fails its Job (backoffLimit 0); the op ends
//     when all G×M pods of the next attempt are Running.
//   - InPlaceRestart: an agent per pod (in this process); the failed pod's
//     containers restart, the others restart in place; the op ends when
//     every JobSet's currentInPlaceRestartAttempt is 1 (every barrier lifted).
//
// inplace/recreate is the ratio of the two.
func BenchmarkInPlaceRestart(b *testing.B) {
	groups, perJobSet := envInt("BENCH_RESTART_JOBSETS", 20), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := groups * perJobSet
	var recreateSum, inPlaceSum time.Duration
	for i := 0; i < b.N; i++ {
		// Recreate.
		ns := newNamespace(b, "ip-recreate")
		createRestartJobSets(b, ns, groups, perJobSet, false)
		waitPodCount(b, ns, total)
		victims := onePodPerGroup(b, ns, groups, v1alpha2.RestartsKey+"=0")
		start := time.Now()
		failPods(b, ns, victims)
		recreate := waitRunningPods(b, ns, v1alpha2.RestartsKey+"=1", total).Sub(start)

		// InPlaceRestart.
		ins := newNamespace(b, "ip-inplace")
		ctx, cancel := context.WithCancel(context.Background())
		agents := newPodAgents(ctx, ins)
		createRestartJobSets(b, ins, groups, perJobSet, true)
		waitPodCount(b, ins, total)
		list, err := cluster.Kube.CoreV1().Pods(ins).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range list.Items {
			agents.start(p.Name, p.Labels[v1alpha2.JobSetNameKey])
		}
		waitAttempts(b, ins, groups, 0)
		victims = onePodPerGroup(b, ins, groups, v1alpha2.RestartsKey+"=0")
		start = time.Now()
		createParallel(b, len(victims), 20, func(k int) error {
			p, err := cluster.Kube.CoreV1().Pods(ins).Get(context.Background(), victims[k], metav1.GetOptions{})
			if err != nil {
				return err
			}
			return agents.crash(p.Name, p.Labels[v1alpha2.JobSetNameKey])
		})
		inPlace := waitAttempts(b, ins, groups, 1).Sub(start)
		cancel()

		b.Logf("round %d: Recreate %.2fs, InPlaceRestart %.2fs (%d JobSets × %d Jobs)", i, recreate.Seconds(), inPlace.Seconds(), groups, perJobSet)
		recreateSum += recreate
		inPlaceSum += inPlace
	}
	n := float64(b.N)
	b.ReportMetric(recreateSum.Seconds()/n, "recreate-s")
	b.ReportMetric(inPlaceSum.Seconds()/n, "inplace-s")
	b.ReportMetric(inPlaceSum.Seconds()/recreateSum.Seconds(), "inplace/recreate")
}

func createRestartJobSets(b *testing.B, ns string, groups, perJobSet int, inPlace bool) {
	b.Helper()
	createParallel(b, groups, 16, func(k int) error {
		spec := batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: podTemplate()}
		fp := &v1alpha2.FailurePolicy{MaxRestarts: 10}
		if inPlace {
			spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			spec.Parallelism, spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
			spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			fp.RestartStrategy = v1alpha2.InPlaceRestart
		}
		js := &v1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", k), Namespace: ns},
			Spec: v1alpha2.JobSetSpec{
				FailurePolicy: fp,
				ReplicatedJobs: []v1alpha2.ReplicatedJob{{
					Name: "w", Replicas: ptr.To(int32(perJobSet)),
					Template: batchv1.JobTemplateSpec{Spec: spec},
				}},
			},
		}
		_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{})
		return err
	})
}

// waitRunningPods returns when n pods matching the selector first ran.
func waitRunningPods(b *testing.B, ns, selector string, n int) time.Time {
	b.Helper()
	var seen time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			seen = time.Now()
			return running >= n, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d running pods (%s): %v", n, selector, err)
	}
	return seen
}

// waitAttempts returns when all JobSets of ns first had that
// currentInPlaceRestartAttempt.
func waitAttempts(b *testing.B, ns string, groups int, attempt int32) time.Time {
	b.Helper()
	var seen time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			at := 0
			for _, js := range list.Items {
				if c := js.Status.CurrentInPlaceRestartAttempt; c != nil && *c == attempt {
					at++
				}
			}
			seen = time.Now()
			return at == groups, nil
		})
	if err != nil {
		b.Fatalf("waiting for %d JobSets at attempt %d: %v", groups, attempt, err)
	}
	return seen
}
