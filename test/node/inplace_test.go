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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Each run of a container appends "<uptime> agent-start" before the agent
// starts and "<uptime> worker-start" once the agent lifts the barrier and
// runs the workload, to a file of its pod in a host directory. /proc/uptime
// is the host's clock in every container, so the pods' lines compare.
const inPlaceEntry = `echo "$(cut -d' ' -f1 /proc/uptime) agent-start" >> "/shared/$POD_NAME"; exec /jobset-inplace-agent`

// The workload: the first pod of the first Job fails once; every other run
// of the first attempt works until the restart; the second attempt finishes.
const inPlaceWorker = `echo "$(cut -d' ' -f1 /proc/uptime) worker-start" >> "/shared/$POD_NAME"
runs=$(grep -c agent-start "/shared/$POD_NAME")
if [ "$runs" = 1 ]; then
  if [ "$JOB_INDEX" = 0 ] && [ "$JOB_COMPLETION_INDEX" = 0 ]; then sleep 3; echo failing; exit 3; fi
  while :; do sleep 1; done
fi
sleep 2`

// In-place restart with the agent in wrapper mode (the agent copied into the
// workload's image, as artifacts/inplace-agent/README.md says): a container
// exits non-zero, every pod's container restarts in place (same pods, their
// restart counts grow, no Job is recreated), and no pod's workload starts
// its second run before every pod's agent has come back.
func TestInPlaceRestartOnRealContainers(t *testing.T) {
	ns := cluster.Namespace(t, "inplace")
	rbac, err := os.ReadFile(filepath.Join(cluster.Root, "artifacts", "inplace-agent", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	apply(t, ns, strings.ReplaceAll(string(rbac), "namespace: default", "namespace: "+ns))
	shared := filepath.Join(cluster.LocalDir, "data", "node", "shared", ns)
	if err := os.MkdirAll(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	apply(t, ns, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: inplace
spec:
  failurePolicy:
    maxRestarts: 3
    restartStrategy: InPlaceRestart
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 2147483647
        podReplacementPolicy: Failed
        template:
          spec:
            serviceAccountName: jobset-inplace-agent
            restartPolicy: OnFailure
            terminationGracePeriodSeconds: 1%s
            volumes:
            - name: shared
              hostPath: {path: %s, type: Directory}
            containers:
            - name: worker
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", %q]
              volumeMounts:
              - {name: shared, mountPath: /shared}
              env:
              - name: JOBSET_NAME
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['jobset.sigs.k8s.io/jobset-name']
              - name: POD_NAME
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.name
              - name: POD_NAMESPACE
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.namespace
              - name: JOB_INDEX
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.labels['jobset.sigs.k8s.io/job-index']
              - name: WORKER_COMMAND
                value: %q
`, onRealNode, shared, busyboxAgentImage, inPlaceEntry, inPlaceWorker))

	// The first attempt: four pods whose workloads run.
	var firstUIDs []string
	eventually(t, 3*time.Minute, "four pods past the first barrier", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 4 {
			return false, err
		}
		firstUIDs = firstUIDs[:0]
		for _, p := range pods.Items {
			if len(readRuns(t, shared, p.Name).worker) < 1 {
				return false, nil
			}
			firstUIDs = append(firstUIDs, string(p.UID))
		}
		return true, nil
	})
	js := waitCondition(t, ns, "inplace", v1alpha2.JobSetCompleted, 4*time.Minute)
	if js.Status.Restarts != 0 {
		t.Errorf("status.restarts = %d, want 0: the Jobs must not be recreated", js.Status.Restarts)
	}
	if js.Status.CurrentInPlaceRestartAttempt == nil || *js.Status.CurrentInPlaceRestartAttempt != 1 {
		t.Errorf("status.currentInPlaceRestartAttempt = %v, want 1", js.Status.CurrentInPlaceRestartAttempt)
	}

	pods, err := cluster.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	var lastAgent, firstWorker float64 = 0, 1e18
	for _, p := range pods.Items {
		uids = append(uids, string(p.UID))
		if n := p.Status.ContainerStatuses[0].RestartCount; n < 1 {
			t.Errorf("pod %s: restartCount %d, want its container restarted in place", p.Name, n)
		}
		r := readRuns(t, shared, p.Name)
		if len(r.agent) != 2 || len(r.worker) != 2 {
			t.Errorf("pod %s: %d agent starts and %d workload starts, want 2 of each (one restart)", p.Name, len(r.agent), len(r.worker))
			continue
		}
		lastAgent = max(lastAgent, r.agent[1])
		firstWorker = min(firstWorker, r.worker[1])
	}
	sort.Strings(uids)
	sort.Strings(firstUIDs)
	if strings.Join(uids, ",") != strings.Join(firstUIDs, ",") {
		t.Errorf("the pods changed: %v before, %v after; in place means the same pods", firstUIDs, uids)
	}
	if !t.Failed() && firstWorker < lastAgent {
		t.Errorf("a workload started its second run at %.2f, before the last agent came back at %.2f: the barrier did not hold", firstWorker, lastAgent)
	}
	t.Logf("second run: last agent back at %.2f s, first workload started at %.2f s (host uptime)", lastAgent, firstWorker)
}

type runs struct{ agent, worker []float64 }

// readRuns parses a pod's file of start times.
func readRuns(t *testing.T, dir, pod string) runs {
	t.Helper()
	var r runs
	data, err := os.ReadFile(filepath.Join(dir, pod))
	if os.IsNotExist(err) {
		return r
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("%s: bad line %q", pod, line)
		}
		switch f[1] {
		case "agent-start":
			r.agent = append(r.agent, v)
		case "worker-start":
			r.worker = append(r.worker, v)
		}
	}
	return r
}
