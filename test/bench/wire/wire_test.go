// Package wire compares protobuf with JSON for JobSets through
// kube-apiserver on the local cluster (aggregation to jobset-apiserver),
// side by side in one run so that the noise of a shared machine cancels in
// the ratios:
//
//	go test -bench . -run '^$' -benchtime 1x -timeout 60m ./test/bench/wire/
//
// Create: BENCH_CREATES JobSets (default 1000) per encoding from 16 clients,
// in interleaved rounds, and as many suspended batch/v1 Jobs with the
// JobSet's workers' pod template (a built-in object through the same
// kube-apiserver: the write a plain client makes instead). List: lists of
// BENCH_LIST_SIZES JobSets (default 1000,10000), BENCH_LIST_SAMPLES pairs
// (default 10), alternating which encoding lists first; the ratio is the
// median of the pairs' protobuf/JSON times, with min and max. It also
// reports jobset-apiserver's RSS and etcd database growth per 1,000
// JobSets while the fixture is created. WatchFanout: BENCH_WATCHERS watches (default 50) per encoding
// see BENCH_UPDATES updates (default 200). The stack lives in
// _output/bench-wire on ports from 29600 (BENCH_PORT_BASE).
package wire

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apiserver"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/integration/framework"
	"github.com/nativejobset/jobset/test/localcluster"
)

var cluster *localcluster.Cluster

// inProcess (BENCH_WIRE_INPROCESS=1) runs the comparisons against an
// in-process jobset-apiserver instead of the local cluster: no
// kube-apiserver in between, no Job reference, and the RSS is the
// whole benchmark process's.
var inProcess = os.Getenv("BENCH_WIRE_INPROCESS") == "1"

func TestMain(m *testing.M) {
	if inProcess {
		os.Exit(m.Run())
	}
	// The cluster's etcd runs without fsync (hack/local-up.sh); so does
	// jobset-apiserver's embedded one here, so that JobSets and Jobs
	// are written with the same durability.
	args := strings.TrimSpace(os.Getenv("JOBSET_APISERVER_ARGS") + " --embedded-etcd-unsafe-no-fsync")
	os.Exit(localcluster.RunBenchmarks(m, localcluster.Options{Prefix: "BENCH_", Dir: "_output/bench-wire", PortBase: 29600, Nodes: 1,
		Env: []string{"JOBSET_APISERVER_ARGS=" + args}}, &cluster))
}

// target is the server the comparisons run against.
type target struct {
	config *rest.Config
	// builtins is false when no kube-apiserver serves Jobs.
	builtins bool
	// pid is the API server's process; etcdURL its embedded etcd.
	pid     func(b *testing.B) int
	etcdURL func(b *testing.B) string
	// direct is the API server's own address, without kube-apiserver.
	direct func(b *testing.B) *rest.Config
}

func newTarget(b *testing.B) target {
	if inProcess {
		var opts *apiserver.Options
		s := framework.StartServerWithOptions(b, func(o *apiserver.Options) { opts = o })
		return target{config: s.Config, pid: func(*testing.B) int { return os.Getpid() },
			etcdURL: func(*testing.B) string { return opts.Recommended.Etcd.StorageConfig.Transport.ServerList[0] },
			direct:  func(*testing.B) *rest.Config { return s.Config }}
	}
	return target{config: cluster.Config, builtins: true,
		pid: func(b *testing.B) int {
			pid, err := cluster.PID("jobset-apiserver")
			if err != nil {
				b.Fatalf("jobset-apiserver pid: %v", err)
			}
			return pid
		},
		etcdURL: clusterEtcdURL, direct: clusterDirect}
}

var tgt target

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// encoding is one way of talking to the API: its clients and the bytes
// their responses carried.
type encoding struct {
	name    string
	jobsets clientset.Interface
	kube    kubernetes.Interface
	bytes   *byteCounter
}

// encodings returns a JSON-only and a protobuf-only client set, without
// client-side rate limiting.
func encodings(b *testing.B) (jsonEnc, pbEnc encoding) {
	mk := func(name, contentType string) encoding {
		cfg := rest.CopyConfig(tgt.config)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.ContentType, cfg.AcceptContentTypes = contentType, contentType
		bc := &byteCounter{}
		cfg.Wrap(bc.wrap)
		js, err := clientset.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return encoding{name: name, jobsets: js, kube: kube, bytes: bc}
	}
	return mk("json", runtime.ContentTypeJSON), mk("protobuf", runtime.ContentTypeProtobuf)
}

func newNamespace(b *testing.B, prefix string) string {
	b.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1000000)
	if inProcess {
		return ns // a standalone server needs no Namespace object
	}
	if out, err := cluster.Kubectl("", "create", "namespace", ns); err != nil {
		b.Fatalf("creating namespace: %v\n%s", err, out)
	}
	b.Cleanup(func() { _, _ = cluster.Kubectl("", "delete", "namespace", ns, "--wait=false") })
	return ns
}

// parallel runs create(i) for i in [from, to) from 16 goroutines, records
// each call's latency, and returns the wall time.
func parallel(b *testing.B, from, to int, lat *latencies, create func(ctx context.Context, i int) error) time.Duration {
	b.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t0 := time.Now()
				err := create(context.Background(), i)
				if lat != nil {
					lat.add(time.Since(t0))
				}
				if err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("create: %v", firstErr)
	}
	return time.Since(start)
}

// encodedSizes returns the JSON and protobuf sizes of obj.
func encodedSizes(b *testing.B, scheme *runtime.Scheme, gv runtime.GroupVersioner, obj runtime.Object) (jsonSize, pbSize int) {
	codecs := serializer.NewCodecFactory(scheme)
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
		if !ok {
			b.Fatalf("no serializer for %s", mt)
		}
		data, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, gv), obj)
		if err != nil {
			b.Fatalf("encoding %T as %s: %v", obj, mt, err)
		}
		if mt == runtime.ContentTypeJSON {
			jsonSize = len(data)
		} else {
			pbSize = len(data)
		}
	}
	return jsonSize, pbSize
}

// BenchmarkWire runs every comparison against one cluster.
func BenchmarkWire(b *testing.B) {
	tgt = newTarget(b)
	jsonEnc, pbEnc := encodings(b)
	b.Run("Create", func(b *testing.B) { benchCreate(b, jsonEnc, pbEnc) })
	b.Run("List", func(b *testing.B) { benchList(b, jsonEnc, pbEnc) })
	b.Run("WatchFanout", func(b *testing.B) { benchWatch(b, jsonEnc, pbEnc) })
}

// createKind is one kind of create measured by benchCreate.
type createKind struct {
	name   string
	create func(ctx context.Context, i int) error
}

// benchCreate: JobSet creates in JSON and in protobuf and, through
// kube-apiserver, creates of a suspended Job with the workers' template,
// in interleaved rounds of 200 so that all kinds share the machine's noise.
func benchCreate(b *testing.B, jsonEnc, pbEnc encoding) {
	total := envInt("BENCH_CREATES", 1000)
	ns := newNamespace(b, "wire-create")

	probe, err := pbEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), benchJobSet(ns, "probe"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	jsScheme := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(jsScheme); err != nil {
		b.Fatal(err)
	}
	jsJSON, jsPB := encodedSizes(b, jsScheme, v1alpha2.SchemeGroupVersion, probe)
	kinds := []createKind{
		{"jobset-json", func(ctx context.Context, i int) error {
			_, err := jsonEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, benchJobSet(ns, fmt.Sprintf("json-%06d", i)), metav1.CreateOptions{})
			return err
		}},
		{"jobset-protobuf", func(ctx context.Context, i int) error {
			_, err := pbEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, benchJobSet(ns, fmt.Sprintf("pb-%06d", i)), metav1.CreateOptions{})
			return err
		}},
	}
	if tgt.builtins {
		kinds = append(kinds, suspendedJobKind(b, pbEnc, probe))
		// The JobSet of only the workers: its one template is the
		// suspended Job's, so the two carry the same pod template.
		kinds = append(kinds, createKind{"one-template-jobset-protobuf", func(ctx context.Context, i int) error {
			_, err := pbEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, workersOnly(benchJobSet(ns, fmt.Sprintf("one-%06d", i))), metav1.CreateOptions{})
			return err
		}})
		direct := directJobSets(b)
		kinds = append(kinds, createKind{"jobset-protobuf-direct", func(ctx context.Context, i int) error {
			_, err := direct.JobsetV1alpha2().JobSets(ns).Create(ctx, benchJobSet(ns, fmt.Sprintf("direct-%06d", i)), metav1.CreateOptions{})
			return err
		}})
	}

	const round = 200
	lat := make([]latencies, len(kinds))
	elapsed := make([]time.Duration, len(kinds))
	b.ResetTimer()
	for from := 0; from < total; from += round {
		to := min(total, from+round)
		for k, kind := range kinds {
			elapsed[k] += parallel(b, from, to, &lat[k], kind.create)
		}
	}
	b.StopTimer()
	rate := map[string]float64{}
	for k, kind := range kinds {
		rate[kind.name] = float64(total) / elapsed[k].Seconds()
		b.ReportMetric(rate[kind.name], kind.name+"-creates/s")
		b.ReportMetric(lat[k].quantile(0.5), kind.name+"-p50-ms")
		b.ReportMetric(lat[k].quantile(0.99), kind.name+"-p99-ms")
	}
	b.ReportMetric(rate["jobset-protobuf"]/rate["jobset-json"], "protobuf/json-rate")
	b.ReportMetric(float64(jsPB), "jobset-protobuf-bytes")
	b.ReportMetric(float64(jsJSON), "jobset-json-bytes")
	if tgt.builtins {
		b.ReportMetric(rate["jobset-protobuf"]/rate["suspended-job-protobuf"], "protobuf-jobset/suspended-job-rate")
		b.ReportMetric(rate["one-template-jobset-protobuf"]/rate["suspended-job-protobuf"], "one-template-jobset/suspended-job-rate")
		b.ReportMetric(rate["jobset-protobuf"]/rate["jobset-protobuf-direct"], "via-kube-apiserver/direct-rate")
	}
}

// directJobSets is a protobuf client of jobset-apiserver itself, bypassing
// kube-apiserver, as the cluster admin: it measures the aggregation hop.
func directJobSets(b *testing.B) clientset.Interface {
	cfg := rest.CopyConfig(tgt.direct(b))
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// clusterDirect is the admin's configuration for jobset-apiserver's own
// port on the local cluster.
func clusterDirect(b *testing.B) *rest.Config {
	cfg, err := cluster.JobSetAPIServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// liveHeapMiB is the API server's Go heap in use right after a forced
// collection, from its /debug/pprof/heap (the process's whole heap: in
// process, the benchmark's clients too).
func liveHeapMiB(b *testing.B) float64 {
	cfg := rest.CopyConfig(tgt.direct(b))
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Param("debug", "1").DoRaw(ctx)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	m := regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`).FindSubmatch(data)
	if m == nil {
		b.Fatal("no HeapInuse in the heap profile")
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n / (1 << 20)
}

// suspendedJobKind creates, in protobuf, suspended batch/v1 Jobs with the
// JobSet's labels and annotations and the pod template of its workers: the
// write a plain client makes for one Job of the JobSet, through the same
// kube-apiserver, with nothing (no Job controller work) after it.
func suspendedJobKind(b *testing.B, pbEnc encoding, probe *v1alpha2.JobSet) createKind {
	jobNS := newNamespace(b, "wire-job")
	spec := jobTemplate(8, "worker").Spec
	spec.Suspend = ptr.To(true)
	newJob := func(name string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNS, Labels: probe.Labels, Annotations: probe.Annotations},
			Spec:       *spec.DeepCopy(),
		}
	}
	jobs := pbEnc.kube.BatchV1().Jobs(jobNS)
	stored, err := jobs.Create(context.Background(), newJob("probe"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	jobScheme := runtime.NewScheme()
	if err := batchv1.AddToScheme(jobScheme); err != nil {
		b.Fatal(err)
	}
	jobJSON, jobPB := encodedSizes(b, jobScheme, batchv1.SchemeGroupVersion, stored)
	b.Logf("stored suspended Job: %d bytes JSON, %d protobuf", jobJSON, jobPB)
	return createKind{"suspended-job-protobuf", func(ctx context.Context, i int) error {
		_, err := jobs.Create(ctx, newJob(fmt.Sprintf("job-%06d", i)), metav1.CreateOptions{})
		return err
	}}
}

// clusterEtcdURL finds the embedded etcd's address in jobset-apiserver's
// log: the local cluster lets it pick a free port.
func clusterEtcdURL(b *testing.B) string {
	data, err := os.ReadFile(filepath.Join(cluster.LocalDir, "logs", "jobset-apiserver.log"))
	if err != nil {
		b.Fatal(err)
	}
	m := regexp.MustCompile(`Embedded etcd is serving.* url="([^"]+)"`).FindAllSubmatch(data, -1)
	if len(m) == 0 {
		b.Fatal("the embedded etcd's address is not in jobset-apiserver's log")
	}
	return string(m[len(m)-1][1])
}

// stats are the server-side sizes benchList reports growth of.
type stats struct {
	rssMiB float64
	// heapMiB is the Go heap in use after a forced collection.
	heapMiB float64
	// dbInUseMiB is etcd's database size in use; valueMiB the bytes of
	// the stored JobSets' values.
	dbInUseMiB, valueMiB float64
}

func serverStats(b *testing.B) stats {
	var st stats
	// RSS first: the forced collection of liveHeapMiB must not shrink it.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tgt.pid(b)))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			st.rssMiB = float64(kb) / 1024
		}
	}
	st.heapMiB = liveHeapMiB(b)
	url := tgt.etcdURL(b)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := c.Status(ctx, url)
	if err != nil {
		b.Fatalf("etcd status: %v", err)
	}
	st.dbInUseMiB = float64(es.DbSizeInUse) / (1 << 20)
	resp, err := c.Get(ctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		b.Fatalf("etcd get: %v", err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/jobsets/") {
			st.valueMiB += float64(len(kv.Value)) / (1 << 20)
		}
	}
	return st
}

// benchList creates each list fixture with protobuf (reporting memory
// growth per 1,000 JobSets), then lists it in alternating encodings.
func benchList(b *testing.B, jsonEnc, pbEnc encoding) {
	var sizes []int
	for _, s := range strings.Split(localcluster.EnvOr("BENCH_LIST_SIZES", "1000,10000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_LIST_SIZES: %q", s)
		}
		sizes = append(sizes, n)
	}
	samples := envInt("BENCH_LIST_SAMPLES", 10)
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ns := newNamespace(b, fmt.Sprintf("wire-list%d", n))
			st0 := serverStats(b)
			took := parallel(b, 0, n, nil, func(ctx context.Context, i int) error {
				_, err := pbEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, benchJobSet(ns, fmt.Sprintf("js-%06d", i)), metav1.CreateOptions{})
				return err
			})
			st1 := serverStats(b)
			b.Logf("%d JobSets created in %s; jobset-apiserver RSS %.0f -> %.0f MiB, live Go heap %.0f -> %.0f MiB, etcd db in use %.1f -> %.1f MiB, JobSet values %.1f -> %.1f MiB",
				n, took.Round(time.Millisecond), st0.rssMiB, st1.rssMiB, st0.heapMiB, st1.heapMiB, st0.dbInUseMiB, st1.dbInUseMiB, st0.valueMiB, st1.valueMiB)
			perThousand := func(v0, v1 float64) float64 { return (v1 - v0) * 1000 / float64(n) }

			var lat [2]latencies
			var bytes [2]int64
			var ratios []float64 // protobuf over JSON, per pair of lists
			encs := [2]encoding{jsonEnc, pbEnc}
			b.ResetTimer()
			for i := range samples {
				// The first list of a pair may warm what the second
				// uses: alternate which encoding goes first.
				order := []int{0, 1}
				if i%2 == 1 {
					order = []int{1, 0}
				}
				var took [2]time.Duration
				for _, k := range order {
					enc := encs[k]
					before := enc.bytes.n.Load()
					t0 := time.Now()
					list, err := enc.jobsets.JobsetV1alpha2().JobSets(ns).List(context.Background(), metav1.ListOptions{})
					took[k] = time.Since(t0)
					lat[k].add(took[k])
					if err != nil || len(list.Items) != n {
						b.Fatalf("%s list: %v (%d items)", enc.name, err, len(list.Items))
					}
					bytes[k] = enc.bytes.n.Load() - before
				}
				ratios = append(ratios, took[1].Seconds()/took[0].Seconds())
			}
			b.StopTimer()
			sort.Float64s(ratios)
			b.Logf("%d JobSets, %d lists per encoding: protobuf/json time min %.3f, median %.3f, max %.3f; p50 JSON %.1f ms, protobuf %.1f ms",
				n, samples, ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1], lat[0].quantile(0.5), lat[1].quantile(0.5))
			b.ReportMetric(lat[0].quantile(0.5), "json-p50-ms")
			b.ReportMetric(lat[1].quantile(0.5), "protobuf-p50-ms")
			b.ReportMetric(ratios[len(ratios)/2], "protobuf/json-time")
			b.ReportMetric(ratios[0], "protobuf/json-time-min")
			b.ReportMetric(ratios[len(ratios)-1], "protobuf/json-time-max")
			b.ReportMetric(float64(bytes[0])/(1<<20), "json-MiB")
			b.ReportMetric(float64(bytes[1])/(1<<20), "protobuf-MiB")
			b.ReportMetric(perThousand(st0.rssMiB, st1.rssMiB), "apiserver-RSS-MiB-per-1000")
			b.ReportMetric(perThousand(st0.heapMiB, st1.heapMiB), "apiserver-live-heap-MiB-per-1000")
			b.ReportMetric(perThousand(st0.dbInUseMiB, st1.dbInUseMiB), "etcd-db-in-use-MiB-per-1000")
			b.ReportMetric(perThousand(st0.valueMiB, st1.valueMiB), "etcd-values-MiB-per-1000")
		})
	}
}

// benchWatch: W watchers per encoding on a namespace; U sequential updates
// of one JobSet; events/s delivered to all watchers, JSON and protobuf
// rounds alternating.
func benchWatch(b *testing.B, jsonEnc, pbEnc encoding) {
	watchers, updates := envInt("BENCH_WATCHERS", 50), envInt("BENCH_UPDATES", 200)
	rounds := envInt("BENCH_WATCH_ROUNDS", 2)
	ns := newNamespace(b, "wire-watch")
	js, err := pbEnc.jobsets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), benchJobSet(ns, "watched"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var took [2]time.Duration
	b.ResetTimer()
	for r := range rounds {
		for k, enc := range []encoding{jsonEnc, pbEnc} {
			took[k] += watchRound(b, enc, pbEnc, ns, js.Name, watchers, updates, fmt.Sprintf("%d-%d", r, k))
		}
	}
	b.StopTimer()
	events := float64(rounds * watchers * updates)
	jsonRate, pbRate := events/took[0].Seconds(), events/took[1].Seconds()
	b.ReportMetric(jsonRate, "json-events/s")
	b.ReportMetric(pbRate, "protobuf-events/s")
	b.ReportMetric(pbRate/jsonRate, "protobuf/json-rate")
}

// watchRound opens the watches in enc, makes the updates with writer, and
// returns the time from the first update until every watcher saw the last.
func watchRound(b *testing.B, enc, writer encoding, ns, name string, watchers, updates int, tag string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cur, err := writer.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var ws []watch.Interface
	for range watchers {
		w, err := enc.jobsets.JobsetV1alpha2().JobSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cur.ResourceVersion})
		if err != nil {
			b.Fatalf("%s watch: %v", enc.name, err)
		}
		ws = append(ws, w)
	}
	defer func() {
		for _, w := range ws {
			w.Stop()
		}
	}()
	var wg sync.WaitGroup
	var done sync.Mutex
	last := time.Time{}
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := 0
			for seen < updates {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						b.Errorf("%s watch closed after %d events", enc.name, seen)
						return
					}
					if ev.Type == watch.Modified {
						seen++
					}
				case <-ctx.Done():
					b.Errorf("%s watch: %d of %d events", enc.name, seen, updates)
					return
				}
			}
			done.Lock()
			if now := time.Now(); now.After(last) {
				last = now
			}
			done.Unlock()
		}()
	}
	start := time.Now()
	for i := range updates {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"round":%q,"update":"%d"}}}`, tag, i)
		if _, err := writer.jobsets.JobsetV1alpha2().JobSets(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatalf("update: %v", err)
		}
	}
	wg.Wait()
	return last.Sub(start)
}
