package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ac "github.com/nativejobset/jobset/pkg/generated/applyconfiguration/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/invariants"
)

const (
	soakRate = 50 // writes per second
	// Clients writing at once: enough to keep the rate at a p99 latency of
	// over a second on a loaded machine.
	soakWorkers = 64
	// JobSets each worker keeps alive: creates below the first, deletes above it.
	soakMinLive, soakMaxLive = 1, 2
	// soakMinAckedFraction is the least share of the offered writes that
	// must be acknowledged. A loaded two-core machine reached 37% in a
	// 10-minute run (test/bench/README.md, "Soak"); an API that is down
	// most of the time reaches far less.
	soakMinAckedFraction = 0.10
)

// soakDuration is SOAK_DURATION (default 60s). Components are killed every
// minute, or at every fifth of a shorter soak; TestSoak skips a kill that
// would land in the last half interval, so a one-minute soak kills four
// times.
func soakDuration(t *testing.T) (run, killEvery time.Duration) {
	run = time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("SOAK_DURATION=%q: want a positive duration", s)
		}
		run = d
	}
	killEvery = time.Minute
	if run < 5*time.Minute {
		killEvery = run / 5
	}
	return run, killEvery
}

// TestSoak drives mixed writes at 50/s through kube-apiserver — create,
// merge patch, server-side apply, /scale of a replicatedjob, suspend and
// resume, delete — with the controller running, and kills a component
// with SIGKILL at every interval (the controller leader, a random
// jobset-apiserver replica with more connections open and
// kube-controller-manager in turn, from a random start), starting it again at once. Afterwards every acknowledged write is reflected and the
// invariants hold; the figures go to SOAK_REPORT (default
// <cluster dir>/soak-report.md).
func TestSoak(t *testing.T) {
	run, killEvery := soakDuration(t)
	ns := namespace(t, "soak")
	l, st := newLedger(), newStats()
	load1 := loadAverage()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rss := sampleRSS(ctx)

	tokens := make(chan struct{}, soakRate)
	var missed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < soakWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			soakWorker(ctx, w, ns, l, st, tokens)
		}()
	}

	var kills []string
	var killTimes []time.Time
	started := time.Now()
	ticker := time.NewTicker(time.Second / soakRate)
	killTicker := time.NewTicker(killEvery)
	end := time.After(run)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	firstKill := rng.Intn(3)
loop:
	for {
		select {
		case <-ticker.C:
			select {
			case tokens <- struct{}{}:
			default:
				missed.Add(1) // every worker busy: the rate was not reached
			}
		case <-killTicker.C:
			// A kill needs time after it for the acknowledged write that
			// proves the load was served again; none lands in the last
			// half interval.
			if time.Until(started.Add(run)) < killEvery/2 {
				killTicker.Stop()
				continue
			}
			victim, err := killNext(t, firstKill+len(kills))
			if err != nil {
				t.Errorf("interval %d killed nothing: %v", len(kills)+1, err)
			}
			kills = append(kills, victim)
			killTimes = append(killTimes, time.Now())
		case <-end:
			break loop
		}
	}
	ticker.Stop()
	killTicker.Stop()
	elapsed := time.Since(started)
	close(tokens)
	wg.Wait()
	cancel()
	revive(t, "after "+t.Name())

	// No pod fails, so no restart; each resume may start one more execution.
	maxAttempts := func(name string) int32 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if r := l.recs[name]; r != nil {
			return r.resumes
		}
		return 0
	}
	settled := checkInvariants(t, ns, invariants.Expectation{MaxAttempts: maxAttempts, Running: true}, 5*time.Minute)
	var lost []string
	if err := waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		lost, err = l.lost(ctx, ns)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("listing the JobSets: %v", err)
	}
	for _, x := range lost {
		t.Errorf("acknowledged write lost: %s", x)
	}
	// The load must have been served, not only survived: enough writes
	// acknowledged, some after every kill, and every client's JobSets
	// alive at the end.
	offered := float64(soakRate) * elapsed.Seconds()
	if acked := float64(st.ackCount()); acked < soakMinAckedFraction*offered {
		t.Errorf("%.0f writes acknowledged of %.0f offered: below the %.0f%% floor", acked, offered, 100*soakMinAckedFraction)
	}
	if len(kills) == 0 {
		t.Errorf("no component was killed in %s", elapsed.Round(time.Second))
	}
	for i, k := range killTimes {
		until := started.Add(elapsed)
		if i+1 < len(killTimes) {
			until = killTimes[i+1]
		}
		if !st.ackedBetween(k, until) {
			t.Errorf("no write acknowledged after kill %d (%s) before the next kill or the end", i+1, kills[i])
		}
	}
	if list, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("listing the JobSets: %v", err)
	} else if len(list.Items) < soakWorkers*soakMinLive {
		t.Errorf("%d JobSets at the end, want at least %d (%d per client)", len(list.Items), soakWorkers*soakMinLive, soakMinLive)
	}

	dbSize, dbInUse, dbErr := etcdDBSize()
	p99 := st.p99()
	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak: %s at %d writes/s, a component killed every %s\n\n", run, soakRate, killEvery)
	fmt.Fprintf(&b, "- writes acknowledged: %d (%.1f/s); not sent because every client was busy: %d\n", st.acked, float64(st.acked)/elapsed.Seconds(), missed.Load())
	fmt.Fprintf(&b, "- errors by code: %s\n", formatCounts(st.errors))
	fmt.Fprintf(&b, "- p99 latency of acknowledged writes: %s\n", p99.Round(time.Millisecond))
	fmt.Fprintf(&b, "- kills: %s\n", strings.Join(kills, ", "))
	fmt.Fprintf(&b, "- JobSet names written: %d; acknowledged writes lost: %d; invariants held %.1fs after the load stopped\n", len(l.recs), len(lost), settled.Seconds())
	if dbErr != nil {
		fmt.Fprintf(&b, "- etcd db size: unknown (%v)\n", dbErr)
	} else {
		fmt.Fprintf(&b, "- etcd db size: %.1f MiB (%.1f MiB in use)\n", float64(dbSize)/(1<<20), float64(dbInUse)/(1<<20))
	}
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at start: %s; at end: %s\n", load1, loadAverage())
	fmt.Fprintf(&b, "\n| process | max RSS (MiB) |\n| --- | --- |\n")
	for _, c := range sortedKeys(rss.max()) {
		fmt.Fprintf(&b, "| %s | %.0f |\n", c, float64(rss.max()[c])/(1<<10))
	}
	report := b.String()
	t.Log("\n" + report)
	path := os.Getenv("SOAK_REPORT")
	if path == "" {
		path = filepath.Join(cl.LocalDir, "soak-report.md")
	}
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Errorf("writing %s: %v", path, err)
	}
	// Every write is valid and unconditional: a client may only see errors
	// it can retry.
	for i, e := range st.unretried {
		if i == 10 {
			t.Errorf("... and %d more", len(st.unretried)-10)
			break
		}
		t.Errorf("a client saw an error it cannot retry: %s", e)
	}
}

// soakWorker writes to JobSets of its own, one write per token.
func soakWorker(ctx context.Context, w int, ns string, l *ledger, st *stats, tokens <-chan struct{}) {
	rng := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
	var live []string
	next, seq := 0, 0
	for range tokens {
		seq++
		if len(live) < soakMinLive {
			if name, ok := soakCreate(ctx, w, &next, ns, l, st); ok {
				live = append(live, name)
			}
			continue
		}
		i := rng.Intn(len(live))
		name := live[i]
		switch op := rng.Intn(100); {
		case op < 10 && len(live) < soakMaxLive:
			if name, ok := soakCreate(ctx, w, &next, ns, l, st); ok {
				live = append(live, name)
			}
		case op < 40:
			_ = patchLabel(ctx, l, st, ns, name, seq)
		case op < 60:
			v := strconv.Itoa(seq)
			start := time.Now()
			_, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Apply(ctx,
				ac.JobSet(name, ns).WithAnnotations(map[string]string{ssaAnnotation: v}),
				metav1.ApplyOptions{FieldManager: "soak", Force: true})
			st.record("apply "+name, time.Since(start), err)
			l.wrote(name, func(r *record) *invariants.Field { return &r.ssa }, v, err)
		case op < 75:
			par := int32(1 + rng.Intn(2))
			start := time.Now()
			_, err := cl.JobSets.JobsetV1alpha2().ReplicatedJobResources(ns).UpdateScale(ctx, name+".w",
				&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name + ".w", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: par}},
				metav1.UpdateOptions{})
			st.record("scale "+name, time.Since(start), err)
			l.wrote(name, func(r *record) *invariants.Field { return &r.par }, strconv.Itoa(int(par)), err)
		case op < 90:
			r := l.get(name)
			l.mu.Lock()
			suspend := r.suspend.Want != "true"
			if !suspend {
				r.resumes++
			}
			l.mu.Unlock()
			start := time.Now()
			_, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(fmt.Sprintf(`{"spec":{"suspend":%v}}`, suspend)), metav1.PatchOptions{})
			st.record("suspend "+name, time.Since(start), err)
			l.wrote(name, func(r *record) *invariants.Field { return &r.suspend }, strconv.FormatBool(suspend), err)
		default:
			if len(live) <= soakMinLive {
				_ = patchLabel(ctx, l, st, ns, name, seq)
				continue
			}
			// Whatever the outcome, the name is not written again.
			_ = deleteJobSet(ctx, l, st, ns, name)
			live = append(live[:i], live[i+1:]...)
		}
	}
}

// soakCreate creates the worker's next JobSet: two Indexed Jobs of one
// pod (parallelism and completions equal, so /scale changes both, as
// elastic Indexed Jobs require).
func soakCreate(ctx context.Context, w int, next *int, ns string, l *ledger, st *stats) (string, bool) {
	name := fmt.Sprintf("s%02d-%05d", w, *next)
	*next++
	js := jobSet(ns, name, 2, 1)
	err := createJobSet(ctx, l, st, js)
	return name, err == nil
}

// killNext kills, in turn from a random start, the controller leader, the
// jobset-apiserver replica with more connections open or
// kube-controller-manager, and starts it again at once. It returns what it
// killed, or an error when it killed nothing.
func killNext(t *testing.T, turn int) (string, error) {
	t.Helper()
	var victim string
	switch turn % 3 {
	case 0:
		c, _, err := leader(context.Background())
		if err != nil {
			return "none", fmt.Errorf("no controller leader: %w", err)
		}
		victim = c
	case 1:
		victim, _ = busiestReplica(t)
	default:
		victim = "kube-controller-manager"
	}
	p, err := cl.Process(victim)
	if err == nil {
		err = p.Kill()
	}
	revive(t, "killed by "+t.Name())
	if err != nil {
		return "none", fmt.Errorf("killing %s: %w", victim, err)
	}
	if turn%3 == 0 {
		victim += " (leader)"
	}
	return victim, nil
}

// rssSampler keeps the largest resident set (VmHWM, KiB) seen of each
// component, across restarts.
type rssSampler struct {
	mu  sync.Mutex
	kib map[string]int64
}

func sampleRSS(ctx context.Context) *rssSampler {
	s := &rssSampler{kib: map[string]int64{}}
	components := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
		"jobset-apiserver-lb"}
	components = append(append(components, apiservers...), controllers...)
	sample := func() {
		for _, c := range components {
			p, err := cl.Process(c)
			if err != nil {
				continue
			}
			if kib := statusKiB(p.PID, "VmHWM:"); kib > 0 {
				s.mu.Lock()
				s.kib[c] = max(s.kib[c], kib)
				s.mu.Unlock()
			}
		}
	}
	sample()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return s
}

func (s *rssSampler) max() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.kib {
		out[k] = v
	}
	return out
}

// statusKiB reads a "<key> <n> kB" line of /proc/<pid>/status.
func statusKiB(pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == key {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			return n
		}
	}
	return 0
}

// etcdDBSize reads the database size of the cluster's etcd, which holds
// the JobSets too, from its metrics.
func etcdDBSize() (total, inUse int64, err error) {
	env, err := os.ReadFile(filepath.Join(cl.LocalDir, "env"))
	if err != nil {
		return 0, 0, err
	}
	var port string
	for _, line := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(line, "ETCD_PORT="); ok {
			port = v
		}
	}
	tlsConfig, err := cl.EtcdClientTLS()
	if err != nil {
		return 0, 0, err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Get("https://127.0.0.1:" + port + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "etcd_mvcc_db_total_size_in_bytes":
			total = int64(v)
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			inUse = int64(v)
		}
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("no etcd_mvcc_db_total_size_in_bytes in etcd's metrics")
	}
	return total, inUse, nil
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
