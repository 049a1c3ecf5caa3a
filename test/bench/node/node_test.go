// Package node measures restarts on the local cluster's real node
// (REAL_NODE=1, the product installed in-cluster as test/node installs it):
// real sandboxes, container starts and terminations, which kwok cannot show.
//
//	make bench-node          (root; builds the node's tools and images first)
//
// One benchmark op is one round of three variants, each from a settled
// namespace, in an order that rotates from round to round:
//
//   - inplace: restartStrategy InPlaceRestart with the agent in wrapper mode;
//   - recreate: the default Recreate, workloads that exit on SIGTERM;
//   - recreate-ignore-term: Recreate whose workloads ignore SIGTERM, so each
//     old pod holds on for its terminationGracePeriodSeconds (10 s).
//
// Each JobSet has 2 Jobs of 2 pods. A round triggers one pod's failure and
// measures, on the host's clock (/proc/uptime, which every container reads
// too), the time until all four workloads run again. BENCH_NODE_PORT_BASE
// (default 25400) moves the stack.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nativejobset/jobset/test/localcluster"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the real-node benchmark needs root (it runs a kubelet and containerd)")
		os.Exit(1)
	}
	o := localcluster.Options{Prefix: "BENCH_NODE_", Dir: "_output/bench-node", PortBase: 25400, Nodes: 1,
		Env: []string{"REAL_NODE=1", "JOBSET=0", "SKIP_BUILD=1"}}
	os.Exit(localcluster.RunBenchmarks(m, o, &cluster))
}

const busyboxAgentImage = "localhost/jobset-local/busybox-inplace-agent:v1"

// Every run of a workload appends "<uptime> worker-start" to a file of its
// pod; the pod named by the trigger file fails once, removing it.
const workload = `trap 'exit 0' TERM
echo "$(cut -d' ' -f1 /proc/uptime) worker-start" >> "/shared/$POD_NAME"
while :; do
  if [ "$JOB_INDEX-$JOB_COMPLETION_INDEX" = 0-0 ] && [ -f /shared/trigger ]; then rm /shared/trigger; exit 3; fi
  sleep 0.2
done`

type variant struct {
	name string
	// manifest renders the JobSet for a shared directory.
	manifest func(shared string) string
}

var variants = []variant{
	{"inplace", func(shared string) string {
		return jobSet(shared, `
  failurePolicy:
    maxRestarts: 100
    restartStrategy: InPlaceRestart`, "2147483647", "OnFailure", 10,
			`["sh", "-c", "exec /jobset-inplace-agent"]`, workload)
	}},
	{"recreate", func(shared string) string {
		return jobSet(shared, `
  failurePolicy:
    maxRestarts: 100`, "0", "Never", 10, "", workload)
	}},
	{"recreate-ignore-term", func(shared string) string {
		return jobSet(shared, `
  failurePolicy:
    maxRestarts: 100`, "0", "Never", 10, "", strings.Replace(workload, "trap 'exit 0' TERM", "trap '' TERM", 1))
	}},
}

// jobSet is the benchmark's JobSet; command empty runs the workload as the
// container's command, else the workload goes to WORKER_COMMAND.
func jobSet(shared, failurePolicy, backoffLimit, restartPolicy string, grace int, command, work string) string {
	extra := ""
	if backoffLimit != "0" {
		extra = "\n        podReplacementPolicy: Failed"
	}
	cmd := fmt.Sprintf("[\"sh\", \"-c\", %q]", work)
	env := ""
	if command != "" {
		cmd = command
		env = fmt.Sprintf(`
              - name: WORKER_COMMAND
                value: %q`, work)
	}
	return fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: bench
spec:%s
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: %s%s
        template:
          spec:
            serviceAccountName: jobset-inplace-agent
            restartPolicy: %s
            terminationGracePeriodSeconds: %d
            nodeSelector:
              jobset.local/real-node: "true"
            tolerations:
            - {key: jobset.local/real-node, operator: Exists, effect: NoSchedule}
            volumes:
            - name: shared
              hostPath: {path: %s, type: Directory}
            containers:
            - name: worker
              image: %s
              imagePullPolicy: Never
              command: %s
              volumeMounts:
              - {name: shared, mountPath: /shared}
              env:
              - name: JOBSET_NAME
                valueFrom: {fieldRef: {fieldPath: "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"}}
              - name: POD_NAME
                valueFrom: {fieldRef: {fieldPath: metadata.name}}
              - name: POD_NAMESPACE
                valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
              - name: JOB_INDEX
                valueFrom: {fieldRef: {fieldPath: "metadata.labels['jobset.sigs.k8s.io/job-index']"}}%s
`, failurePolicy, backoffLimit, extra, restartPolicy, grace, shared, busyboxAgentImage, cmd, env)
}

func BenchmarkRestartOnRealNode(b *testing.B) {
	if err := cluster.InstallInCluster(); err != nil {
		b.Fatal(err)
	}
	rbac, err := os.ReadFile(filepath.Join(cluster.Root, "artifacts", "inplace-agent", "rbac.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	samples := map[string][]float64{}
	firsts := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := variants[(i+k)%len(variants)]
			first, all, err := runOnce(b, v, string(rbac))
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			samples[v.name] = append(samples[v.name], all)
			firsts[v.name] = append(firsts[v.name], first)
			b.Logf("round %d %s: first workload running again %.2f s after the failure, all four %.2f s", i, v.name, first, all)
		}
	}
	med := map[string]float64{}
	for name, s := range samples {
		med[name] = median(s)
		b.ReportMetric(med[name], name+"-s")
		b.ReportMetric(median(firsts[name]), name+"-first-s")
	}
	b.ReportMetric(med["inplace"]/med["recreate"], "inplace/recreate")
	b.ReportMetric(med["recreate-ignore-term"]/med["recreate"], "ignoreterm/recreate")
}

func median(s []float64) float64 {
	s = append([]float64{}, s...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// runOnce creates the variant's JobSet in a new namespace, waits until its
// four workloads run, triggers the failure and returns the seconds until the
// first and until all four workloads run again; it deletes the namespace and
// waits for it to go.
func runOnce(b *testing.B, v variant, rbac string) (first, all float64, err error) {
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%s-%d", v.name, time.Now().UnixNano()%100000)
	if _, err := cluster.Kubectl("", "create", "namespace", ns); err != nil {
		return 0, 0, err
	}
	defer func() {
		_, _ = cluster.Kubectl("", "delete", "namespace", ns, "--wait=true", "--timeout=3m")
	}()
	shared := filepath.Join(cluster.LocalDir, "data", "node", "shared", ns)
	if err := os.MkdirAll(shared, 0o777); err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(shared)
	if out, err := cluster.Kubectl(strings.ReplaceAll(rbac, "namespace: default", "namespace: "+ns), "apply", "-f", "-"); err != nil {
		return 0, 0, fmt.Errorf("%v: %s", err, out)
	}
	if out, err := cluster.Kubectl(v.manifest(shared), "apply", "-n", ns, "-f", "-"); err != nil {
		return 0, 0, fmt.Errorf("%v: %s", err, out)
	}
	if err := waitStarts(ctx, shared, 0, 4); err != nil {
		return 0, 0, fmt.Errorf("first start: %w", err)
	}
	t0, err := uptime()
	if err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(filepath.Join(shared, "trigger"), nil, 0o644); err != nil {
		return 0, 0, err
	}
	if err := waitStarts(ctx, shared, t0, 4); err != nil {
		return 0, 0, fmt.Errorf("after the failure: %w", err)
	}
	starts, err := startsAfter(shared, t0)
	if err != nil {
		return 0, 0, err
	}
	return starts[0] - t0, starts[3] - t0, nil
}

// waitStarts waits until n workload starts after t0 are recorded.
func waitStarts(ctx context.Context, dir string, t0 float64, n int) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		s, err := startsAfter(dir, t0)
		return len(s) >= n, err
	})
}

// startsAfter returns the sorted workload start times after t0.
func startsAfter(dir string, t0 float64) ([]float64, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, f := range files {
		if f.Name() == "trigger" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 2 && fields[1] == "worker-start" {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil && v > t0 {
					out = append(out, v)
				}
			}
		}
	}
	sort.Float64s(out)
	return out, nil
}

func uptime() (float64, error) {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.Fields(string(data))[0], 64)
}
