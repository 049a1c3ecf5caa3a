package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// resolveAll is the shell every pod of the peers JobSet starts with: it
// resolves each name of $PEERS through the cluster DNS by the short name
// <hostname>.<subdomain>, as a program would: through the C library's
// resolver and the pod's search domains (busybox's ping prints the address
// it resolved; its nslookup ignores search domains). It prints "resolved
// <name> <address>".
const resolveAll = `
for h in $PEERS; do
  n=0
  while :; do
    ip=$(ping -c 1 -W 1 "$h" 2>/dev/null | sed -n '1s/^PING [^ ]* (\([0-9.]*\)).*/\1/p')
    [ -n "$ip" ] && break
    n=$((n+1)); [ "$n" -lt 180 ] || { echo "cannot resolve $h"; exit 1; }
    sleep 1
  done
  echo "resolved $h $ip"
done
`

// The leader's server: each connection runs a handler that records the
// line it reads and answers "pong".
const leaderServer = `
printf '#!/bin/sh\nread line; echo "$line" >> /tmp/got; echo pong\n' > /tmp/handler
chmod +x /tmp/handler
nc -ll -p 7777 -e /tmp/handler &
n=0
until [ "$(cat /tmp/got 2>/dev/null | wc -l)" -ge 4 ]; do
  n=$((n+1)); [ "$n" -lt 300 ] || { echo "only $(cat /tmp/got | wc -l) workers connected"; exit 1; }
  sleep 1
done
echo "served:"; cat /tmp/got
`

const workerClient = `
n=0
until reply=$(echo "ping from $(hostname)" | nc -w 5 "$COORDINATOR" 7777) && [ "$reply" = pong ]; do
  n=$((n+1)); [ "$n" -lt 120 ] || { echo "no answer from $COORDINATOR"; exit 1; }
  sleep 1
done
echo "coordinator $COORDINATOR answered $reply"
`

// A leader and workers: every pod resolves every peer's hostname and the
// coordinator's through CoreDNS, the workers connect to the leader on a
// port and get its answer, the leader finishes once all four have, and the
// success policy (every Job) completes the JobSet.
func TestLeaderWorkersResolveAndConnect(t *testing.T) {
	ns := cluster.Namespace(t, "peers")
	const js = "peers"
	hosts := []string{js + "-leader-0-0"}
	for j := 0; j < 2; j++ {
		for i := 0; i < 2; i++ {
			hosts = append(hosts, fmt.Sprintf("%s-workers-%d-%d", js, j, i))
		}
	}
	var names []string
	for _, h := range hosts {
		names = append(names, h+"."+js)
	}
	container := func(script string) string {
		return fmt.Sprintf(`            containers:
            - name: main
              image: %s
              imagePullPolicy: Never
              command: ["sh", "-c", %q]
              env:
              - name: PEERS
                value: %q
              - name: COORDINATOR
                valueFrom:
                  fieldRef:
                    fieldPath: metadata.annotations['jobset.sigs.k8s.io/coordinator']
`, busyboxImage, script, strings.Join(names, " "))
	}
	apply(t, ns, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %[1]s
spec:
  coordinator:
    replicatedJob: leader
  # All replicatedJobs, the leader too: with only the workers targeted the
  # JobSet could complete, and its controller delete the leader's still
  # active Job, before the leader's pod exits and logs what it resolved.
  successPolicy:
    operator: All
  replicatedJobs:
  - name: leader
    replicas: 1
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%[2]s
%[3]s
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            terminationGracePeriodSeconds: 1%[2]s
%[4]s
`, js, onRealNode, container(resolveAll+leaderServer), container(resolveAll+workerClient)))

	waitCondition(t, ns, js, v1alpha2.JobSetCompleted, 5*time.Minute)

	// Every pod found every peer at the address its pod really has.
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ipOf := map[string]string{}
	for _, p := range pods.Items {
		ipOf[p.Spec.Hostname+"."+p.Spec.Subdomain] = p.Status.PodIP
	}
	if len(ipOf) != len(hosts) {
		t.Fatalf("found pods for %d hostnames, want %d: %v", len(ipOf), len(hosts), ipOf)
	}
	for _, p := range pods.Items {
		logs := podLogs(t, ns, p.Name)
		for _, name := range names {
			want := fmt.Sprintf("resolved %s %s", name, ipOf[name])
			if !strings.Contains(logs, want) {
				t.Errorf("pod %s did not log %q:\n%s", p.Name, want, logs)
			}
		}
		if strings.Contains(p.Name, "-workers-") && !strings.Contains(logs, "coordinator "+js+"-leader-0-0."+js+" answered pong") {
			t.Errorf("worker %s did not reach the coordinator:\n%s", p.Name, logs)
		}
		if strings.Contains(p.Name, "-leader-") && strings.Count(logs, "ping from ") != 4 {
			t.Errorf("the leader served %d workers, want 4:\n%s", strings.Count(logs, "ping from "), logs)
		}
	}
}

// waitCondition waits for a JobSet condition to be True.
func waitCondition(t *testing.T, ns, name string, cond v1alpha2.JobSetConditionType, timeout time.Duration) *v1alpha2.JobSet {
	t.Helper()
	var last *v1alpha2.JobSet
	eventually(t, timeout, fmt.Sprintf("JobSet %s/%s %s", ns, name, cond), func(ctx context.Context) (bool, error) {
		js, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the API may be restarting
		}
		last = js
		for _, c := range js.Status.Conditions {
			if c.Type == string(cond) && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	return last
}

// podLogs reads a pod's container logs through kube-apiserver and the
// kubelet.
func podLogs(t *testing.T, ns, pod string) string {
	t.Helper()
	data, err := cluster.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s: %v", pod, err)
	}
	return string(data)
}
