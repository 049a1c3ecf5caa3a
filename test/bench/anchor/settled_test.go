package anchor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

// BenchmarkSettledJobSets: many small JobSets at rest, on ours and on
// upstream v0.12.0, each on a fresh cluster. An op is BENCH_SETTLED_PAIRS
// (default 2) pairs of sides, the order of the two alternating from pair
// to pair (run it with -benchtime 1x). BENCH_SETTLED_JOBSETS (default 10000) JobSets
// of one Job each are created (the first 1,000 in one namespace, the rest
// in another); once every Job exists and no JobSet has changed for 15 s,
// the benchmark measures the CPU of the JobSet controller over
// BENCH_SETTLED_WINDOW (default 90s, longer than the watch cache's 75 s of
// event history) with nothing changing. Then it changes one JobSet, Job
// and Service that no controller acts on a few times (the watch caches
// drop their history only as events come), waits 30 s, and reads the RSS
// and Go heap of the API servers once their runtimes settle (memory), and
// the RSS of the cluster's etcd, against what they held before the first
// create (heap profiles kept in _output/bench-anchor-profiles). It then
// compacts the etcd stores under the objects (storage_test.go) and reads
// the API servers once more, 90 s later. Last, BENCH_LIST_SAMPLES (default 5)
// rounds of lists through kube-apiserver, of the 1,000 and of every
// JobSet, by a JSON client, a protobuf one, and one that reads the JSON
// without decoding it, in an order that turns round from one round to the
// next.
//
// BENCH_SETTLED_ONLY=ours (or upstream) runs that side alone, for trying
// settings out; it reports no ratios.
//
// The Jobs have parallelism BENCH_SETTLED_PODS (default 0: no pods; pods
// cost kube-apiserver and kwok the same on both sides, and 10,000 of them
// would take most of the run).
//
//	make build tools upstream-jobset
//	flock /tmp/cluster.lock go test -tags fieldsv1string -run '^$' -bench SettledJobSets -benchtime 1x -timeout 120m -v ./test/bench/anchor/
func BenchmarkSettledJobSets(b *testing.B) {
	n := envInt(b, "BENCH_SETTLED_JOBSETS", 10000)
	pods := envInt(b, "BENCH_SETTLED_PODS", 0)
	window, err := time.ParseDuration(localcluster.EnvOr("BENCH_SETTLED_WINDOW", "90s"))
	if err != nil {
		b.Fatalf("BENCH_SETTLED_WINDOW: %v", err)
	}
	samples := envInt(b, "BENCH_LIST_SAMPLES", 5)
	pairs := envInt(b, "BENCH_SETTLED_PAIRS", 2)
	only := localcluster.EnvOr("BENCH_SETTLED_ONLY", "")
	if only != "" && only != "ours" && only != "upstream" {
		b.Fatalf("BENCH_SETTLED_ONLY: %q is neither ours nor upstream", only)
	}
	if only != "ours" {
		requireUpstream(b)
	}
	got := map[string][]settled{}
	for i := 0; i < b.N*pairs; i++ {
		order := []string{"ours", "upstream"}
		if i%2 == 1 {
			order = []string{"upstream", "ours"}
		}
		for _, name := range order {
			if only != "" && name != only {
				continue
			}
			withFreshCluster(b, name, func(c *localcluster.Cluster, u *upstream) {
				s := settle(b, c, u, name, i, n, pods, window, samples)
				b.Logf("%s: %s", name, s)
				got[name] = append(got[name], s)
			})
		}
	}
	if only != "" {
		// One side alone is for trying settings out: nothing to compare.
		b.Logf("BENCH_SETTLED_ONLY=%s: no ratios", only)
		return
	}
	reportSettled(b, got, n)
}

func envInt(b *testing.B, key string, def int) int {
	v, err := strconv.Atoi(localcluster.EnvOr(key, strconv.Itoa(def)))
	if err != nil || v < 0 {
		b.Fatalf("%s: not a count: %q", key, os.Getenv(key))
	}
	return v
}

// settled is what one side measured.
type settled struct {
	create, allJobs time.Duration
	// API servers' growth over the n JobSets: kube-apiserver on both
	// sides (it holds the Jobs and Services on both, the JobSets on
	// upstream's), jobset-apiserver on ours.
	kube, ours memory
	// The same, once the stores were compacted (what the servers'
	// compactors do by themselves within two intervals).
	kubeCompacted, oursCompacted memory
	// The cluster's etcd: RSS growth (MiB). It holds upstream's JobSets;
	// ours' are in jobset-apiserver's embedded etcd, inside its RSS.
	etcdRSS float64
	// The JobSet controller at rest: CPU over the window (s), RSS (MiB).
	controllerCPU, controllerRSS float64
	window                       time.Duration
	// Median list times by "<size>/<encoding>".
	lists map[string]time.Duration
}

func (s settled) String() string {
	return fmt.Sprintf("created in %.1fs, all Jobs after %.1fs; kube-apiserver +%.1f MiB RSS (+%.1f heap in use), jobset-apiserver +%.1f MiB RSS (+%.1f heap in use); stores compacted: kube-apiserver +%.1f MiB RSS, jobset-apiserver +%.1f MiB RSS (+%.1f anonymous); controller %.2f CPU-s over %s, RSS %.1f MiB; lists %v",
		s.create.Seconds(), s.allJobs.Seconds(), s.kube.rssMiB, s.kube.heapMiB, s.ours.rssMiB, s.ours.heapMiB,
		s.kubeCompacted.rssMiB, s.oursCompacted.rssMiB, s.oursCompacted.anonMiB,
		s.controllerCPU, s.window, s.controllerRSS, s.lists)
}

const (
	smallNamespace, restNamespace, nudgeNamespace = "settled-1000", "settled-rest", "settled-nudge"
	smallList                                     = 1000
)

func settledJobSet(ns string, i, pods int) *v1alpha2.JobSet {
	spec := podTemplate(1)
	spec.Parallelism = ptr.To(int32(pods))
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("js-%05d", i), Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: rjName, Replicas: ptr.To(int32(1)),
			Template: batchv1.JobTemplateSpec{Spec: spec},
		}}},
	}
}

// settle runs one side: the baseline, the JobSets, the wait until they
// rest, the window, the measures, the lists.
func settle(b *testing.B, c *localcluster.Cluster, u *upstream, side string, op, n, pods int, window time.Duration, samples int) settled {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{smallNamespace, restNamespace, nudgeNamespace} {
		if out, err := c.Kubectl("", "create", "namespace", ns); err != nil {
			b.Fatalf("creating namespace: %v\n%s", err, out)
		}
	}
	// JSON: upstream's CRD speaks no protobuf.
	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.QPS, cfg.Burst = -1, 0
	jobsets := clientset.NewForConfigOrDie(cfg)
	kube := protoKube(c, -1, 0)

	servers := []apiServer{{"kube-apiserver", c.Config}}
	if side == "ours" {
		direct, err := c.JobSetAPIServerConfig()
		if err != nil {
			b.Fatal(err)
		}
		servers = append(servers, apiServer{"jobset-apiserver", direct})
	}
	nudge := newNudger(b, c, jobsets)
	before := map[string]memory{}
	for _, s := range servers {
		before[s.name] = s.memory(b, c, "")
	}
	etcdBefore := etcdRSS(b, c)

	quiet := watchQuiet(ctx, b, jobsets)
	start := time.Now()
	benchutil.Parallel(b, n, 16, func(i int) error {
		ns := restNamespace
		if i < smallList {
			ns = smallNamespace
		}
		_, err := jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, settledJobSet(ns, i, pods), metav1.CreateOptions{})
		return err
	})
	var s settled
	s.create = time.Since(start)
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, phaseTimeout, true, func(ctx context.Context) (bool, error) {
		have := 0
		for _, ns := range []string{smallNamespace, restNamespace} {
			list, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			have += len(list.Items)
		}
		return have >= n, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d Jobs: %v", n, err)
	}
	s.allJobs = time.Since(start)
	// At rest: no JobSet written for 15 s.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, phaseTimeout, true, func(context.Context) (bool, error) {
		return quiet() > 15*time.Second, nil
	}); err != nil {
		b.Fatalf("the JobSets did not come to rest: %v", err)
	}

	pid := controllerPID(b, c, u)
	cpu0 := cpuSeconds(b, pid)
	// Nothing changes during the window; it outlasts the watch cache's
	// event history, so what remains is what the servers hold at rest.
	select {
	case <-time.After(window):
	case <-ctx.Done():
	}
	s.controllerCPU, s.window = cpuSeconds(b, pid)-cpu0, window
	if quiet() < window {
		b.Logf("%s: a JobSet changed during the window (%s ago)", side, quiet().Round(time.Second))
	}
	var err2 error
	if s.controllerRSS, err2 = benchutil.ProcessRSSMiB(pid); err2 != nil {
		b.Fatal(err2)
	}
	// The watch caches drop their history (and the old versions of the
	// objects it holds) only as new events come: a few changes, long
	// after the burst, let them shrink as they would in a cluster where
	// something changes now and then. Then the runtime gets time to
	// return the freed pages.
	nudge.run(ctx)
	select {
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	for _, srv := range servers {
		srv.logHistory(b, side)
	}
	profile := fmt.Sprintf("%s-%d", side, op)
	s.kube, s.ours = readServers(b, c, side, servers, before, profile)
	etcdAfter := etcdRSS(b, c)
	s.etcdRSS = etcdAfter - etcdBefore
	b.Logf("%s etcd: RSS %.1f -> %.1f MiB", side, etcdBefore, etcdAfter)

	// The same servers once their stores are compacted (storage_test.go),
	// as the API servers' own compactors leave them within two intervals.
	stores := storesOf(b, c, side)
	for _, st := range stores {
		st.compact(ctx, b, side)
	}
	select {
	case <-time.After(compactedSettle):
	case <-ctx.Done():
	}
	for _, st := range stores {
		st.logSize(ctx, b, side)
	}
	s.kubeCompacted, s.oursCompacted = readServers(b, c, side+" compacted", servers, before, profile+"-compacted")
	s.lists = listTimes(b, c, n, samples)
	return s
}

// compactedSettle is how long the servers get after the compaction:
// jobset-apiserver's maintenance of its embedded etcd runs once a minute,
// then the runtime gets 30 s to return freed pages.
const compactedSettle = 90 * time.Second

// readServers reads each server's memory (keeping its heap profile under
// profile) and returns kube-apiserver's and jobset-apiserver's
// growth since before.
func readServers(b *testing.B, c *localcluster.Cluster, side string, servers []apiServer, before map[string]memory, profile string) (kube, ours memory) {
	for _, srv := range servers {
		after := srv.memory(b, c, profile)
		// File-backed pages: jobset-apiserver's embedded etcd maps its
		// database; kube-apiserver's etcd is a process of its own.
		b.Logf("%s %s: RSS %.1f -> %.1f MiB (anonymous %.1f -> %.1f, file-backed %.1f -> %.1f), heap in use %.1f -> %.1f MiB, live objects %.1f -> %.1f MiB",
			side, srv.name, before[srv.name].rssMiB, after.rssMiB, before[srv.name].anonMiB, after.anonMiB,
			before[srv.name].fileMiB, after.fileMiB, before[srv.name].heapMiB, after.heapMiB,
			before[srv.name].liveMiB, after.liveMiB)
		b.Logf("%s %s after: freed heap pages kept %.1f MiB, stacks %.1f MiB, runtime bookkeeping %.1f MiB",
			side, srv.name, after.keptFreeMiB, after.stackMiB, after.runtimeMiB)
		if srv.name == "kube-apiserver" {
			kube = after.minus(before[srv.name])
		} else {
			ours = after.minus(before[srv.name])
		}
	}
	return kube, ours
}

// etcdRSS is the RSS of the cluster's etcd in MiB.
func etcdRSS(b *testing.B, c *localcluster.Cluster) float64 {
	pid, err := c.PID("etcd")
	if err != nil {
		b.Fatalf("etcd pid: %v", err)
	}
	rss, err := benchutil.ProcessRSSMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	return rss
}

// nudger changes one object of each kind that the burst created in
// thousands (JobSets, Jobs, Services), none of which any controller acts
// on: the JobSet is managed by nobody, the Job suspended, the Service
// without a selector.
type nudger struct {
	b       *testing.B
	jobsets clientset.Interface
	kube    kubernetes.Interface
}

func newNudger(b *testing.B, c *localcluster.Cluster, jobsets clientset.Interface) nudger {
	ctx := context.Background()
	js := settledJobSet(nudgeNamespace, 0, 0)
	js.Name, js.Spec.ManagedBy = "nudge", ptr.To("example.com/nobody")
	if _, err := jobsets.JobsetV1alpha2().JobSets(nudgeNamespace).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		b.Fatalf("the nudged JobSet: %v", err)
	}
	spec := podTemplate(1)
	spec.Suspend = ptr.To(true)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nudge"}, Spec: spec}
	if _, err := c.Kube.BatchV1().Jobs(nudgeNamespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		b.Fatalf("the nudged Job: %v", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nudge"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.Kube.CoreV1().Services(nudgeNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		b.Fatalf("the nudged Service: %v", err)
	}
	return nudger{b: b, jobsets: jobsets, kube: c.Kube}
}

// run changes the label of each nudged object 20 times, ten times a
// second.
func (n nudger) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for k := 0; k < 20; k++ {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"nudge":"%d"}}}`, k))
		if _, err := n.jobsets.JobsetV1alpha2().JobSets(nudgeNamespace).Patch(ctx, "nudge", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			n.b.Fatalf("nudging the JobSet: %v", err)
		}
		if _, err := n.kube.BatchV1().Jobs(nudgeNamespace).Patch(ctx, "nudge", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			n.b.Fatalf("nudging the Job: %v", err)
		}
		if _, err := n.kube.CoreV1().Services(nudgeNamespace).Patch(ctx, "nudge", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			n.b.Fatalf("nudging the Service: %v", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// watchQuiet watches every JobSet and returns how long ago the last event
// came.
func watchQuiet(ctx context.Context, b *testing.B, jobsets clientset.Interface) func() time.Duration {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	open := func(ctx context.Context, rv string) (watch.Interface, error) {
		return jobsets.JobsetV1alpha2().JobSets("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}
	w, err := open(ctx, "")
	if err != nil {
		b.Fatalf("watching JobSets: %v", err)
	}
	go follow(ctx, w, open, func(watch.Event) { last.Store(time.Now().UnixNano()) })
	return func() time.Duration { return time.Since(time.Unix(0, last.Load())) }
}

func controllerPID(b *testing.B, c *localcluster.Cluster, u *upstream) int {
	if u != nil {
		return u.cmd.Process.Pid
	}
	pid, err := c.PID("jobset-controller")
	if err != nil {
		b.Fatalf("jobset-controller pid: %v", err)
	}
	return pid
}

func cpuSeconds(b *testing.B, pid int) float64 {
	cpu, err := benchutil.ProcessCPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// apiServer is one API server of the cluster, reached as the admin.
type apiServer struct {
	name   string
	config *rest.Config
}

// memory is a server's RSS (and its anonymous and file-backed parts), its
// heap in use (whole spans) and its live objects (HeapAlloc), all right
// after a forced collection: the heap's spans less its live objects are
// the slots freed objects left in spans that still hold live ones.
type memory struct {
	rssMiB, anonMiB, fileMiB, heapMiB, liveMiB float64
	// What else the Go runtime holds (read, not subtracted): freed heap
	// pages not yet returned to the kernel, goroutine stacks, and its own
	// bookkeeping (spans, the collector's metadata, profiling buckets).
	keptFreeMiB, stackMiB, runtimeMiB float64
}

// minus is the growth from before to m.
func (m memory) minus(before memory) memory {
	return memory{
		rssMiB:  m.rssMiB - before.rssMiB,
		anonMiB: m.anonMiB - before.anonMiB,
		fileMiB: m.fileMiB - before.fileMiB,
		heapMiB: m.heapMiB - before.heapMiB,
		liveMiB: m.liveMiB - before.liveMiB,
	}
}

// After its collections at rest a server's background scavenger returns
// the freed pages it keeps, at a pace of its own (about 1 % of a core):
// seconds for jobset-apiserver's heap, sometimes more than 15 s for
// kube-apiserver's, seven times larger (test/bench/README.md). The reading
// waits until the kept pages are within scavengeSlack of the tenth of the
// heap in use the runtime keeps on purpose, or stop falling between two
// looks scavengeLook apart, for at most scavengeMax.
const (
	scavengeLook  = 5 * time.Second
	scavengeSlack = 4.0 // MiB
	scavengeMax   = 2 * time.Minute
)

// memory forces two garbage collections through the server's heap
// profile, waits for its scavenger (above), forces another (saving the
// profile when profile is not "") and reads the live objects, waits for
// the scavenger again, then reads its heap and its RSS.
func (s apiServer) memory(b *testing.B, c *localcluster.Cluster, profile string) memory {
	cfg := rest.CopyConfig(s.config)
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*scavengeMax+time.Minute)
	defer cancel()
	heap := func(debug string, collect bool) []byte {
		req := kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/heap")
		if collect {
			req = req.Param("gc", "1")
		}
		if debug != "" {
			req = req.Param("debug", debug)
		}
		data, err := req.DoRaw(ctx)
		if err != nil {
			b.Fatalf("%s heap profile: %v", s.name, err)
		}
		return data
	}
	// Two collections at rest first. The runtime keeps freed pages up to a
	// tenth above the heap in use of its last collection, counted before
	// that collection's sweep frees anything: after one collection it may
	// still keep all it freed, after a second about a tenth of what is in
	// use. Then its background scavenger returns the rest, as it would in
	// a server left alone for a while; the runtime's statistics (debug=1
	// without gc=1) are read without collecting again.
	heap("", true)
	heap("", true)
	runtimeStats := func() []byte { return heap("1", false) }
	s.awaitScavenger(b, ctx, runtimeStats, "after two collections")
	// A third collection gives the live objects (and the profile); what
	// it freed gets the scavenger's time again before the RSS is read.
	profileData := heap("", true)
	if profile != "" {
		dir := filepath.Join(localcluster.RepoRoot(), "_output", "bench-anchor-profiles")
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.pprof", profile, s.name))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, profileData, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("heap profile written to %s", path)
	}
	live := s.memStat(b, runtimeStats(), "HeapAlloc")
	s.awaitScavenger(b, ctx, runtimeStats, "after the third")
	stats := runtimeStats()
	read := func(name string) float64 { return s.memStat(b, stats, name) }
	inuse := read("HeapInuse")
	keptFree := read("HeapIdle") - read("HeapReleased")
	runtimeMeta := read("MSpan") + read("MCache") + read("GCSys") + read("BuckHashSys") + read("OtherSys")
	pid, err := c.PID(s.name)
	if err != nil {
		b.Fatalf("%s pid: %v", s.name, err)
	}
	rss, err := benchutil.ProcessRSSMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	anon, file, err := benchutil.ProcessRSSSplit(pid)
	if err != nil {
		b.Fatal(err)
	}
	return memory{rssMiB: rss, anonMiB: anon, fileMiB: file, heapMiB: inuse, liveMiB: live,
		keptFreeMiB: keptFree, stackMiB: read("Stack"), runtimeMiB: runtimeMeta}
}

// memStat reads one of the runtime's statistics, in MiB, from a heap
// profile in text form (debug=1).
func (s apiServer) memStat(b *testing.B, stats []byte, name string) float64 {
	// "# Stack = inuse / sys" lines give two figures: the first.
	m := regexp.MustCompile(`(?m)^# ` + name + ` = (\d+)(?: / \d+)?$`).FindSubmatch(stats)
	if m == nil {
		b.Fatalf("%s: no %s in the heap profile", s.name, name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v / (1 << 20)
}

// awaitScavenger looks at the freed pages the server keeps every
// scavengeLook until they are within scavengeSlack of a tenth of its heap
// in use or stop falling, for at most scavengeMax, and logs how long it
// waited and what was still kept.
func (s apiServer) awaitScavenger(b *testing.B, ctx context.Context, stats func() []byte, when string) {
	start := time.Now()
	keptNow := func() (kept, inuse float64) {
		st := stats()
		return s.memStat(b, st, "HeapIdle") - s.memStat(b, st, "HeapReleased"), s.memStat(b, st, "HeapInuse")
	}
	kept, inuse := keptNow()
	tick := time.NewTicker(scavengeLook)
	defer tick.Stop()
	for kept > inuse/10+scavengeSlack && time.Since(start) < scavengeMax && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			continue // the loop ends on ctx.Err()
		}
		before := kept
		kept, inuse = keptNow()
		if kept > before-scavengeSlack/4 {
			break // no longer falling
		}
	}
	b.Logf("%s: %s, the scavenger waited for %s, %.1f MiB of freed pages kept", s.name, when, time.Since(start).Round(time.Second), kept)
}

// logHistory logs the capacity of the server's watch caches of JobSets,
// Jobs and Services (the rings of recent events and the versions they
// hold), from its /metrics.
func (s apiServer) logHistory(b *testing.B, side string) {
	kube, err := kubernetes.NewForConfig(s.config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Logf("%s %s /metrics: %v", side, s.name, err)
		return
	}
	re := regexp.MustCompile(`(?m)^watch_cache_capacity\{group="[^"]*",resource="(jobsets|jobs|services)"\} (\d+)$`)
	var got []string
	for _, m := range re.FindAllSubmatch(data, -1) {
		got = append(got, string(m[1])+"="+string(m[2]))
	}
	b.Logf("%s %s watch cache capacity after the nudges: %v", side, s.name, got)
}

// listTimes lists the 1,000 JobSets of one namespace and all n, through
// kube-apiserver, samples times with each encoding in pairs alternating
// which goes first, and returns the median of each. A protobuf client
// accepts JSON too, which is what it gets from a custom resource.
func listTimes(b *testing.B, c *localcluster.Cluster, n, samples int) map[string]time.Duration {
	clients := map[string]clientset.Interface{}
	for _, enc := range []struct{ name, contentType, accept string }{
		{"json", "application/json", "application/json"},
		{"protobuf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
	} {
		cfg := rest.CopyConfig(c.Config)
		cfg.ContentType, cfg.AcceptContentTypes = enc.contentType, enc.accept
		cfg.QPS, cfg.Burst = -1, 0
		cfg.Timeout = 5 * time.Minute
		clients[enc.name] = clientset.NewForConfigOrDie(cfg)
	}
	sizes := []struct {
		name      string
		namespace string
		want      int
	}{{strconv.Itoa(min(n, smallList)), smallNamespace, min(n, smallList)}, {strconv.Itoa(n), "", n + 1}} // and the nudged one
	times := map[string][]time.Duration{}
	for _, size := range sizes {
		for k := 0; k < samples; k++ {
			encodings := []string{"json", "protobuf", "json-undecoded"}
			if k%2 == 1 {
				encodings = []string{"json-undecoded", "protobuf", "json"}
			}
			for _, enc := range encodings {
				start := time.Now()
				got, err := listOnce(clients, enc, size.namespace)
				took := time.Since(start)
				if err != nil {
					b.Fatalf("listing %s JobSets (%s): %v", size.name, enc, err)
				}
				if got != size.want {
					b.Fatalf("listing %s JobSets (%s): got %d", size.name, enc, got)
				}
				key := size.name + "/" + enc
				times[key] = append(times[key], took)
			}
		}
	}
	medians := map[string]time.Duration{}
	for k, ts := range times {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		medians[k] = ts[len(ts)/2]
	}
	return medians
}

// listOnce lists the JobSets of namespace (all when "") with the client
// of enc and returns how many came. json-undecoded reads the JSON body
// without decoding it: the server's and the transfer's share of a list,
// without the client's decoding, which is the same work on both sides.
func listOnce(clients map[string]clientset.Interface, enc, namespace string) (int, error) {
	if enc != "json-undecoded" {
		list, err := clients[enc].JobsetV1alpha2().JobSets(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	req := clients["json"].JobsetV1alpha2().RESTClient().Get().Resource("jobsets")
	if namespace != "" {
		req = req.Namespace(namespace)
	}
	body, err := req.DoRaw(context.Background())
	if err != nil {
		return 0, err
	}
	// Count the items without decoding them: each has one "uid".
	return bytes.Count(body, []byte(`"uid":`)), nil
}

func reportSettled(b *testing.B, got map[string][]settled, n int) {
	mean := func(side string, pick func(settled) float64) float64 {
		sum := 0.0
		for _, s := range got[side] {
			sum += pick(s)
		}
		return sum / float64(len(got[side]))
	}
	perThousand := 1000 / float64(n)
	// The JobSets' share of upstream's kube-apiserver: its growth less
	// that of ours, which holds the same Jobs and Services but no JobSets.
	// Each reading: at rest, and with the stores compacted.
	for _, r := range []struct {
		prefix     string
		kube, ours func(settled) memory
	}{
		{"", func(s settled) memory { return s.kube }, func(s settled) memory { return s.ours }},
		{"compacted-", func(s settled) memory { return s.kubeCompacted }, func(s settled) memory { return s.oursCompacted }},
	} {
		for _, m := range []struct {
			name string
			pick func(memory) float64
		}{
			{"RSS", func(m memory) float64 { return m.rssMiB }},
			{"anonymous-RSS", func(m memory) float64 { return m.anonMiB }},
			{"heap", func(m memory) float64 { return m.heapMiB }},
			{"live", func(m memory) float64 { return m.liveMiB }},
		} {
			ours := mean("ours", func(s settled) float64 { return m.pick(r.ours(s)) }) * perThousand
			up := (mean("upstream", func(s settled) float64 { return m.pick(r.kube(s)) }) -
				mean("ours", func(s settled) float64 { return m.pick(r.kube(s)) })) * perThousand
			b.ReportMetric(ours, r.prefix+"jobset-apiserver-"+m.name+"-MiB/1000")
			b.ReportMetric(up, r.prefix+"upstream-CR-"+m.name+"-MiB/1000")
			b.ReportMetric(ours/up, r.prefix+m.name+"-ours/upstream")
		}
	}
	// With the storage: upstream's JobSets also live in the cluster's etcd
	// (its growth less ours'), ours' in the etcd inside jobset-apiserver.
	ours := mean("ours", func(s settled) float64 { return s.ours.rssMiB }) * perThousand
	up := (mean("upstream", func(s settled) float64 { return s.kube.rssMiB + s.etcdRSS }) -
		mean("ours", func(s settled) float64 { return s.kube.rssMiB + s.etcdRSS })) * perThousand
	b.ReportMetric(up, "upstream-CR-RSS-with-etcd-MiB/1000")
	b.ReportMetric(ours/up, "RSS-with-etcd-ours/upstream")
	for _, side := range []string{"ours", "upstream"} {
		b.ReportMetric(mean(side, func(s settled) float64 { return s.etcdRSS }), "etcd-RSS-growth-MiB-"+side)
		b.ReportMetric(mean(side, func(s settled) float64 { return 100 * s.controllerCPU / s.window.Seconds() }), "controller-CPU-%-"+side)
		b.ReportMetric(mean(side, func(s settled) float64 { return s.controllerRSS }), "controller-RSS-MiB-"+side)
	}
	for key := range got["ours"][0].lists {
		o := mean("ours", func(s settled) float64 { return s.lists[key].Seconds() })
		u := mean("upstream", func(s settled) float64 { return s.lists[key].Seconds() })
		b.ReportMetric(o/u, "list-"+key+"-ours/upstream")
	}
}
