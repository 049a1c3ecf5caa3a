package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
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
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/benchutil"
)

const failPatch = `{"metadata":{"labels":{"pod-fail.stage.kwok.x-k8s.io":"true"},"annotations":{"pod-fail.stage.kwok.x-k8s.io/delay":"0s"}}}`

// failPods makes kwok fail the given pods, all at once.
func failPods(b *testing.B, ns string, pods []string) {
	b.Helper()
	benchutil.Parallel(b, len(pods), 20, func(k int) error {
		_, err := cluster.Kube.CoreV1().Pods(ns).Patch(context.Background(), pods[k], types.MergePatchType, []byte(failPatch), metav1.PatchOptions{})
		return err
	})
}

// onePodPerGroup returns one running pod of each group (JobSet or plain
// group) of the namespace: the pods of Jobs whose name ends in "-0".
func onePodPerGroup(b *testing.B, ns string, groups int, selector string) []string {
	b.Helper()
	var names []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 5*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, nil
			}
			names = names[:0]
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
					strings.HasSuffix(p.Labels["batch.kubernetes.io/job-name"], "-0") {
					names = append(names, p.Name)
				}
			}
			return len(names) == groups, nil
		})
	if err != nil {
		b.Fatalf("waiting for a running pod in each of %d groups: %v (have %d)", groups, err, len(names))
	}
	return names
}

// terminationModel is how kwok's fake kubelet ends a deleted pod.
type terminationModel struct {
	name        string
	annotations map[string]string
}

// terminationModels: "prompt" ends a deleted pod after 100 ms, as if every
// process exited at once on SIGTERM (hack/local/kwok/stages.yaml,
// pod-terminate); "grace-period" ends it at a random time between 1 s and
// the end of its 30 s grace period, as kwok's stock pod-delete stage
// does, like a node whose processes ignore SIGTERM (pod-terminate-late).
var terminationModels = []terminationModel{
	{name: "prompt"},
	{name: "grace-period", annotations: map[string]string{"pod-terminate.stage.kwok.x-k8s.io/ignores-sigterm": "true"}},
}

// BenchmarkRestart, for each termination model: G JobSets of M Jobs (one
// pod each, backoffLimit 0) run; one pod of each fails at once; the
// controller's time ends when all G×M Jobs of the next attempt exist. The
// reference does the same work with a plain client: G×M plain Jobs run, the
// same pods fail, and the client (50 goroutines, no client-side rate
// limit) deletes all the Jobs with foreground propagation, waits until
// they are gone and creates them again. One op runs each side twice, in
// the order controller, reference, reference, controller, each in a
// namespace of its own that is deleted, and waited for, before the next
// starts. controller/plain is the controller's time over the reference's
// (0.5: twice as fast as the naive path).
//
// BENCH_RESTART_TRACE=1 writes the timeline of each controller restart
// (when each pod, Job and JobSet passed each step) to
// _output/bench/restart-trace-<namespace>.txt.
func BenchmarkRestart(b *testing.B) {
	for _, m := range terminationModels {
		b.Run("termination="+m.name, func(b *testing.B) { benchmarkRestart(b, m) })
	}
}

func benchmarkRestart(b *testing.B, m terminationModel) {
	groups, perJobSet := envInt("BENCH_RESTART_JOBSETS", 20), envInt("BENCH_JOBS_PER_JOBSET", 4)
	total := groups * perJobSet
	kube := unlimitedKube()
	tmpl := podTemplate()
	tmpl.Annotations = m.annotations
	// The controller's half: its time, from the failures until every Job of
	// the next attempt exists.
	controllerHalf := func() time.Duration {
		ns := newNamespace(b, "restart-ctrl")
		defer deleteNamespace(b, ns)
		benchutil.Parallel(b, groups, 16, func(k int) error {
			js := &v1alpha2.JobSet{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%d", k), Namespace: ns},
				Spec: v1alpha2.JobSetSpec{
					FailurePolicy: &v1alpha2.FailurePolicy{MaxRestarts: 10},
					ReplicatedJobs: []v1alpha2.ReplicatedJob{{
						Name: "w", Replicas: ptr.To(int32(perJobSet)),
						Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: tmpl}},
					}},
				},
			}
			_, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{})
			return err
		})
		waitPodCount(b, ns, total)
		victims := onePodPerGroup(b, ns, groups, v1alpha2.RestartsKey+"=0")
		var tr *tracer
		if os.Getenv("BENCH_RESTART_TRACE") == "1" {
			tr = startTracer(b, ns)
		}
		start := time.Now()
		failPods(b, ns, victims)
		took := waitJobCount(b, ns, v1alpha2.RestartsKey+"=1", total).Sub(start)
		if tr != nil {
			tr.write(b, start, ns)
		}
		return took
	}
	// The reference's half: the plain client's time for the same restart.
	name := func(k int) string { return fmt.Sprintf("g%d-%d", k/perJobSet, k%perJobSet) }
	job := func(k int) *batchv1.Job {
		j := plainJob(name(k), k/perJobSet)
		j.Spec.Template.Annotations = m.annotations
		return j
	}
	plainHalf := func() time.Duration {
		ns := newNamespace(b, "restart-plain")
		defer deleteNamespace(b, ns)
		benchutil.Parallel(b, total, 50, func(k int) error {
			_, err := kube.BatchV1().Jobs(ns).Create(context.Background(), job(k), metav1.CreateOptions{})
			return err
		})
		waitPodCount(b, ns, total)
		victims := onePodPerGroup(b, ns, groups, "bench=plain")
		start := time.Now()
		failPods(b, ns, victims)
		fg := metav1.DeletePropagationForeground
		benchutil.Parallel(b, total, 50, func(k int) error {
			return kube.BatchV1().Jobs(ns).Delete(context.Background(), name(k), metav1.DeleteOptions{PropagationPolicy: &fg})
		})
		waitJobsGone(b, ns)
		benchutil.Parallel(b, total, 50, func(k int) error {
			_, err := kube.BatchV1().Jobs(ns).Create(context.Background(), job(k), metav1.CreateOptions{})
			return err
		})
		return waitJobCount(b, ns, "bench=plain", total).Sub(start)
	}

	// Idle when this benchmark runs first in a fresh cluster.
	b.ReportMetric(controllerRSSMiB(b), "controller-RSS-MiB-at-start")
	var ctrl, plain samples
	for i := 0; i < b.N; i++ {
		c1 := controllerHalf()
		p1 := plainHalf()
		p2 := plainHalf()
		c2 := controllerHalf()
		b.Logf("op %d (%s termination, %d Jobs): controller %.2fs then %.2fs; plain foreground delete+wait+create %.2fs then %.2fs",
			i, m.name, total, c1.Seconds(), c2.Seconds(), p1.Seconds(), p2.Seconds())
		ctrl.add(c1, c2)
		plain.add(p1, p2)
	}
	b.ReportMetric(ctrl.mean(), "controller-s")
	b.ReportMetric(plain.mean(), "plain-s")
	b.ReportMetric(ctrl.mean()/plain.mean(), "controller/plain")
	b.Logf("controller %s; plain %s", ctrl, plain)
}

// samples are the times of one side of a ratio benchmark.
type samples []time.Duration

func (s *samples) add(d ...time.Duration) { *s = append(*s, d...) }

func (s samples) mean() float64 {
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum.Seconds() / float64(len(s))
}

// String is the samples' min / median / max in seconds.
func (s samples) String() string {
	if len(s) == 0 {
		return "no samples"
	}
	sorted := append(samples(nil), s...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return fmt.Sprintf("%.2f / %.2f / %.2f s (min / median / max of %d)",
		sorted[0].Seconds(), sorted[len(sorted)/2].Seconds(), sorted[len(sorted)-1].Seconds(), len(sorted))
}

func waitJobsGone(b *testing.B, ns string) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			list, err := cluster.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			return err == nil && len(list.Items) == 0, nil
		})
	if err != nil {
		b.Fatalf("waiting for the Jobs of %s to be gone: %v", ns, err)
	}
}

// tracer records, from watches, when each object of a namespace first
// reached each step of a restart.
type tracer struct {
	mu    sync.Mutex
	steps map[string]map[string]time.Time // step → object → first seen
	// hops are pairs of steps whose per-object durations write reports:
	// the step medians alone mix objects that passed at different times.
	hops   [][2]string
	footer string // written after the timeline
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newTracer returns a tracer whose watches run until write stops them.
func newTracer() (*tracer, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	return &tracer{steps: map[string]map[string]time.Time{}, cancel: cancel}, ctx
}

// follow passes every event of a watch to note until the tracer stops,
// opening the watch again when the server ends it (followWatch).
func (t *tracer) follow(ctx context.Context, open func(ctx context.Context, rv string) (watch.Interface, error), note func(watch.Event)) {
	t.done.Add(1)
	go func() {
		defer t.done.Done()
		followWatch(ctx, open, func(ev watch.Event) bool { note(ev); return false })
	}()
}

// watcher is any typed client of one resource in one namespace.
type watcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// watchOf opens watches of c from a resourceVersion, for followWatch.
func watchOf(c watcher) func(ctx context.Context, rv string) (watch.Interface, error) {
	return func(ctx context.Context, rv string) (watch.Interface, error) {
		return c.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	}
}

// followWatch passes the events of the watches open returns to handle
// until handle returns true (followWatch then returns true) or ctx ends.
// When the server ends a watch, the next one starts from the last version
// seen, or, after an error event, from the current state (a watch without
// resourceVersion starts with the objects that exist, which only repeats
// what was seen).
func followWatch(ctx context.Context, open func(ctx context.Context, rv string) (watch.Interface, error), handle func(watch.Event) bool) bool {
	rv := ""
	for ctx.Err() == nil {
		w, err := open(ctx, rv)
		if err != nil {
			select { // back off before the next watch
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		done := drainWatch(ctx, w, &rv, handle)
		w.Stop()
		if done {
			return true
		}
	}
	return false
}

func drainWatch(ctx context.Context, w watch.Interface, rv *string, handle func(watch.Event) bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok:
				return false
			case ev.Type == watch.Error:
				*rv = ""
				return false
			}
			if o, ok := ev.Object.(metav1.Object); ok {
				*rv = o.GetResourceVersion()
			}
			if handle(ev) {
				return true
			}
		}
	}
}

func startTracer(b *testing.B, ns string) *tracer {
	b.Helper()
	t, ctx := newTracer()
	t.follow(ctx, watchOf(cluster.Kube.CoreV1().Pods(ns)), func(ev watch.Event) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return
		}
		attempt := p.Labels[v1alpha2.RestartsKey]
		id := p.Name
		switch {
		case ev.Type == watch.Deleted:
			t.note("pod "+attempt+" gone", id)
		case p.DeletionTimestamp != nil:
			t.note("pod "+attempt+" deleting", id)
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				t.note("pod "+attempt+" terminated after deletion", id)
			}
		case p.Status.Phase == corev1.PodFailed:
			t.note("pod "+attempt+" failed", id)
		case ev.Type == watch.Added:
			t.note("pod "+attempt+" created", id)
		}
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			t.note("pod "+attempt+" running", id)
		}
	})
	t.follow(ctx, watchOf(cluster.Kube.BatchV1().Jobs(ns)), func(ev watch.Event) {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		attempt := j.Labels[v1alpha2.RestartsKey]
		id := j.Name + "/" + string(j.UID)
		switch {
		case ev.Type == watch.Deleted:
			t.note("job "+attempt+" gone", id)
		case j.DeletionTimestamp != nil:
			t.note("job "+attempt+" deleting", id)
		case ev.Type == watch.Added:
			t.note("job "+attempt+" created", id)
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.note("job "+attempt+" failed", id)
			}
		}
	})
	t.follow(ctx, watchOf(cluster.JobSets.JobsetV1alpha2().JobSets(ns)), func(ev watch.Event) {
		js, ok := ev.Object.(*v1alpha2.JobSet)
		if !ok {
			return
		}
		if js.Status.Restarts > 0 {
			t.note("jobset restarts=1 stored", js.Name)
		}
	})
	return t
}

// note notes that id reached step now, unless it had already; it reports
// whether this was the first time.
func (t *tracer) note(step, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.steps[step]
	if m == nil {
		m = map[string]time.Time{}
		t.steps[step] = m
	}
	if _, seen := m[id]; seen {
		return false
	}
	m[id] = time.Now()
	return true
}

// addFooter adds text to write after the timeline.
func (t *tracer) addFooter(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.footer += text
}

// cpuTable is the CPU time each process of the cluster used between two
// readings of clusterCPUSeconds, elapsed apart.
func cpuTable(before, after map[string]float64, elapsed time.Duration) string {
	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return after[names[i]]-before[names[i]] > after[names[j]]-before[names[j]] })
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nCPU time in %.2f s (%d cores: %.2f CPU-s at most)\n", elapsed.Seconds(), runtime.NumCPU(), elapsed.Seconds()*float64(runtime.NumCPU()))
	var total float64
	for _, name := range names {
		d := after[name] - before[name]
		total += d
		fmt.Fprintf(&sb, "%-32s %6.2f s\n", name, d)
	}
	fmt.Fprintf(&sb, "%-32s %6.2f s\n", "total", total)
	return sb.String()
}

// requestTable is how many requests of each kind kube-apiserver served
// between two readings of apiRequestCounts.
func requestTable(before, after map[string]float64) string {
	type row struct {
		key string
		n   float64
	}
	var rows []row
	var total float64
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			rows = append(rows, row{k, d})
			total += d
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].n > rows[j].n })
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nkube-apiserver requests in that time (%.0f)\n", total)
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-48s %6.0f\n", r.key, r.n)
	}
	return sb.String()
}

// noteLatest notes that id reached step now, replacing an earlier time.
func (t *tracer) noteLatest(step, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.steps[step] == nil {
		t.steps[step] = map[string]time.Time{}
	}
	t.steps[step][id] = time.Now()
}

// write stops the watches and writes, per step, how many objects reached
// it and when the first, the median and the last did (seconds after start).
func (t *tracer) write(b *testing.B, start time.Time, ns string) {
	t.cancel()
	t.done.Wait()
	type row struct {
		step             string
		n                int
		first, med, last float64
	}
	var rows []row
	for step, m := range t.steps {
		var ds []float64
		for _, at := range m {
			ds = append(ds, at.Sub(start).Seconds())
		}
		sort.Float64s(ds)
		rows = append(rows, row{step, len(ds), ds[0], ds[len(ds)/2], ds[len(ds)-1]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].last < rows[j].last })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-32s %5s %8s %8s %8s\n", "step", "count", "first", "median", "last")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-32s %5d %8.2f %8.2f %8.2f\n", r.step, r.n, r.first, r.med, r.last)
	}
	if len(t.hops) > 0 {
		fmt.Fprintf(&sb, "\n%-64s %5s %8s %8s %8s\n", "hop (per object)", "count", "min", "median", "max")
		for _, h := range t.hops {
			var ds []float64
			for id, to := range t.steps[h[1]] {
				if from, ok := t.steps[h[0]][id]; ok {
					ds = append(ds, to.Sub(from).Seconds())
				}
			}
			if len(ds) == 0 {
				continue
			}
			sort.Float64s(ds)
			fmt.Fprintf(&sb, "%-64s %5d %8.2f %8.2f %8.2f\n", h[0]+" → "+h[1], len(ds), ds[0], ds[len(ds)/2], ds[len(ds)-1])
		}
	}
	sb.WriteString(t.footer)
	writeTrace(b, ns, sb.String())
}

// writeTrace logs a restart's trace and writes it to
// _output/bench/restart-trace-<namespace>.txt (a benchmark's log is cut
// short).
func writeTrace(b *testing.B, ns, text string) {
	b.Logf("restart trace of %s:\n%s", ns, text)
	path := filepath.Join(cluster.LocalDir, "restart-trace-"+ns+".txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Logf("writing %s: %v", path, err)
	}
}
