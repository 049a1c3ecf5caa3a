// Package bench measures the JobSet API server in process: create, get,
// list and watch fan-out against a real server with an embedded etcd, both
// running inside the benchmark binary.
//
//	go test -bench . -run '^$' ./test/bench/...
//
// Knobs (flags after -args, or environment variables):
//
//	-list-sizes / BENCH_LIST_SIZES   comma-separated JobSet counts for List (default 1000,10000)
//	-watchers   / BENCH_WATCHERS     watchers for the fan-out benchmark (default 50)
//	-updates    / BENCH_UPDATES      updates per fan-out round (default 200)
package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/integration/framework"
)

var (
	listSizes = flag.String("list-sizes", envOr("BENCH_LIST_SIZES", "1000,10000"), "comma-separated JobSet counts for the List benchmarks")
	watchers  = flag.Int("watchers", envInt("BENCH_WATCHERS", 50), "watchers in the fan-out benchmark")
	updates   = flag.Int("updates", envInt("BENCH_UPDATES", 200), "updates per fan-out round")
)

// setupWorkers is the number of goroutines that create the List fixtures.
const setupWorkers = 16

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// jobSet is a typical two-replicatedJob JobSet, about 2.5 KiB of JSON once
// the server has defaulted it.
func jobSet(ns, name string) *v1alpha2.JobSet {
	tmpl := func(n int32) batchv1.JobTemplateSpec {
		return batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: &n, Completions: &n,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: "registry.example/train:v1",
					Command: []string{"python", "train.py", "--epochs=10"},
					Ports:   []corev1.ContainerPort{{ContainerPort: 8080}},
					Env:     []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
				}}},
			},
		}}
	}
	four := int32(4)
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"bench": "yes"}},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{
			{Name: "driver", Template: tmpl(1)},
			{Name: "workers", Replicas: &four, Template: tmpl(2)},
		}},
	}
}

// unlimitedClient is a typed client without client-side rate limiting. It
// speaks JSON, as the figures in README.md were measured, unless
// BENCH_CONTENT_TYPE names another encoding (test/bench/wire compares the
// two side by side).
func unlimitedClient(b *testing.B, cfg *rest.Config) clientset.Interface {
	b.Helper()
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	c.ContentType = envOr("BENCH_CONTENT_TYPE", "application/json")
	c.AcceptContentTypes = c.ContentType
	client, err := clientset.NewForConfig(c)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

// latencies collects operation latencies from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// report adds the rate (ops/s), p50 and p99 (in milliseconds) to the
// benchmark.
func (l *latencies) report(b *testing.B, ops int, elapsed time.Duration) {
	l.reportAs(b, ops, elapsed, "ops/s")
}

// reportAs is report with another unit for the rate.
func (l *latencies) reportAs(b *testing.B, ops int, elapsed time.Duration, rateUnit string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 || elapsed <= 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	pct := func(p float64) float64 {
		i := int(p * float64(len(l.d)-1))
		return float64(l.d[i].Microseconds()) / 1000
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), rateUnit)
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// reportRSS reports the resident set of this process, which holds the API
// server, its embedded etcd and the benchmark's clients.
func reportRSS(b *testing.B) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			b.ReportMetric(kb/1024, "rss-MiB")
		case "VmHWM:":
			b.ReportMetric(kb/1024, "peak-rss-MiB")
		}
	}
}

// timeSerial runs op b.N times from one goroutine, reports throughput,
// latency percentiles and RSS, and returns the elapsed time.
func timeSerial(b *testing.B, op func() error) time.Duration {
	var lat latencies
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	lat.report(b, b.N, elapsed)
	reportRSS(b)
	return elapsed
}

// timeParallel is timeSerial from 4 × GOMAXPROCS client goroutines.
func timeParallel(b *testing.B, op func() error) {
	var lat latencies
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t0 := time.Now()
			if err := op(); err != nil {
				b.Error(err)
				return
			}
			lat.add(time.Since(t0))
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	lat.report(b, b.N, elapsed)
	reportRSS(b)
}

// BenchmarkAPIServer runs every benchmark against one server, started once.
func BenchmarkAPIServer(b *testing.B) {
	s := framework.StartServer(b)
	client := unlimitedClient(b, s.Config)
	ctx := context.Background()

	var created atomic.Int64
	create := func() error {
		obj := jobSet("bench-create", fmt.Sprintf("c-%d", created.Add(1)))
		_, err := client.JobsetV1alpha2().JobSets("bench-create").Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	get := func() error {
		_, err := client.JobsetV1alpha2().JobSets("bench-get").Get(ctx, "target", metav1.GetOptions{})
		return err
	}
	b.Run("Create", func(b *testing.B) { timeSerial(b, create) })
	b.Run("CreateParallel", func(b *testing.B) { timeParallel(b, create) })
	b.Run("Get", func(b *testing.B) {
		// The function runs once per b.N tried: the target may exist.
		_, err := client.JobsetV1alpha2().JobSets("bench-get").Create(ctx, jobSet("bench-get", "target"), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
		timeSerial(b, get)
	})
	b.Run("GetParallel", func(b *testing.B) { timeParallel(b, get) })

	for _, field := range strings.Split(*listSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			b.Fatalf("bad list size %q", field)
		}
		ns := fmt.Sprintf("bench-list-%d", n)
		populated := false
		ensurePopulated := func(b *testing.B) {
			if populated {
				return
			}
			b.StopTimer()
			setup := time.Now()
			populate(b, client, ns, n)
			b.Logf("created %d JobSets in %s (%d workers)", n, time.Since(setup).Round(time.Millisecond), setupWorkers)
			populated = true
			b.StartTimer()
		}
		b.Run(fmt.Sprintf("List/%d", n), func(b *testing.B) {
			ensurePopulated(b)
			js := client.JobsetV1alpha2().JobSets(ns)
			elapsed := timeSerial(b, func() error {
				list, err := js.List(ctx, metav1.ListOptions{})
				if err == nil && len(list.Items) != n {
					err = fmt.Errorf("listed %d, want %d", len(list.Items), n)
				}
				return err
			})
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "objects/s")
		})
		b.Run(fmt.Sprintf("ListPaged500/%d", n), func(b *testing.B) {
			ensurePopulated(b)
			js := client.JobsetV1alpha2().JobSets(ns)
			timeSerial(b, func() error {
				total := 0
				opts := metav1.ListOptions{Limit: 500}
				for {
					list, err := js.List(ctx, opts)
					if err != nil {
						return err
					}
					total += len(list.Items)
					if list.Continue == "" {
						break
					}
					opts.Continue = list.Continue
				}
				if total != n {
					return fmt.Errorf("listed %d, want %d", total, n)
				}
				return nil
			})
		})
	}

	b.Run(fmt.Sprintf("WatchFanout/%dwatchers-%dupdates", *watchers, *updates), func(b *testing.B) {
		benchWatchFanout(b, client, *watchers, *updates)
	})
}

// populate creates n JobSets in ns with setupWorkers goroutines.
func populate(b *testing.B, client clientset.Interface, ns string, n int) {
	b.Helper()
	js := client.JobsetV1alpha2().JobSets(ns)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, setupWorkers)
	for w := 0; w < setupWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if _, err := js.Create(context.Background(), jobSet(ns, fmt.Sprintf("l-%06d", i)), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("populating %s: %v", ns, err)
	}
}

// watchRounds numbers the fan-out rounds across calls, one namespace each.
var watchRounds atomic.Int64

// benchWatchFanout opens `watchers` watches on one namespace, then writes
// `updates` label changes to one JobSet, and measures the time until every
// watcher has seen every update, and the delivery latency of each event
// (from just before the update request to its receipt by a watcher).
func benchWatchFanout(b *testing.B, client clientset.Interface, nWatchers, nUpdates int) {
	ctx := context.Background()
	var lat latencies
	var total time.Duration
	for round := 0; round < b.N; round++ {
		b.StopTimer()
		ns := fmt.Sprintf("bench-watch-%d", watchRounds.Add(1))
		js := client.JobsetV1alpha2().JobSets(ns)
		obj, err := js.Create(ctx, jobSet(ns, "watched"), metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sent := make([]atomic.Int64, nUpdates) // unix nanos before update i was sent
		var ws []watch.Interface
		for w := 0; w < nWatchers; w++ {
			wi, err := js.Watch(ctx, metav1.ListOptions{ResourceVersion: obj.ResourceVersion})
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, wi)
		}
		var done sync.WaitGroup
		failed := make(chan string, nWatchers)
		for _, wi := range ws {
			done.Add(1)
			go func(wi watch.Interface) {
				defer done.Done()
				seen := 0
				timeout := time.After(2 * time.Minute)
				for seen < nUpdates {
					select {
					case ev, ok := <-wi.ResultChan():
						if !ok {
							failed <- "watch closed"
							return
						}
						if ev.Type != watch.Modified {
							continue
						}
						now := time.Now()
						o := ev.Object.(*v1alpha2.JobSet)
						seq, err := strconv.Atoi(o.Labels["seq"])
						if err != nil || seq >= nUpdates {
							failed <- fmt.Sprintf("bad seq label %q", o.Labels["seq"])
							return
						}
						lat.add(now.Sub(time.Unix(0, sent[seq].Load())))
						seen++
					case <-timeout:
						failed <- fmt.Sprintf("saw %d of %d events", seen, nUpdates)
						return
					}
				}
			}(wi)
		}

		b.StartTimer()
		start := time.Now()
		cur := obj
		for i := 0; i < nUpdates; i++ {
			cur.Labels["seq"] = strconv.Itoa(i)
			sent[i].Store(time.Now().UnixNano())
			cur, err = js.Update(ctx, cur, metav1.UpdateOptions{})
			if err != nil {
				b.Fatal(err)
			}
		}
		writesDone := time.Since(start)
		done.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		total += elapsed
		for _, wi := range ws {
			wi.Stop()
		}
		close(failed)
		if msg, ok := <-failed; ok {
			b.Fatalf("watcher failed: %s", msg)
		}
		b.Logf("round %d: %d updates written in %s, all %d watchers done after %s",
			round, nUpdates, writesDone.Round(time.Millisecond), nWatchers, elapsed.Round(time.Millisecond))
	}
	events := b.N * nWatchers * nUpdates
	lat.reportAs(b, events, total, "events/s")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-until-all-seen")
	reportRSS(b)
}
