package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/localcluster"
)

// storeState is what a backup must bring back, and what the controller
// must leave alone afterwards.
type storeState struct {
	jobsets map[string]*v1alpha2.JobSet
	jobs    map[string]types.UID
	pods    map[string]types.UID
}

// readStoreState reads the JobSets of ns through client and the Jobs and
// pods (those not being deleted) from kube-apiserver.
func readStoreState(ctx context.Context, client clientset.Interface, ns string) (storeState, error) {
	s := storeState{jobsets: map[string]*v1alpha2.JobSet{}, jobs: map[string]types.UID{}, pods: map[string]types.UID{}}
	list, err := client.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for i := range list.Items {
		s.jobsets[list.Items[i].Name] = &list.Items[i]
	}
	jobs, err := cluster.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			s.jobs[j.Name] = j.UID
		}
	}
	pods, err := cluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			s.pods[p.Name] = p.UID
		}
	}
	return s, nil
}

// sameJobSets reports how the JobSets of got differ from want: identity,
// resourceVersion and the whole status.
func sameJobSets(want, got storeState) []string {
	var diffs []string
	for name, w := range want.jobsets {
		g, ok := got.jobsets[name]
		switch {
		case !ok:
			diffs = append(diffs, "JobSet "+name+" is missing")
		case g.UID != w.UID:
			diffs = append(diffs, fmt.Sprintf("JobSet %s uid %s, want %s", name, g.UID, w.UID))
		case g.ResourceVersion != w.ResourceVersion:
			diffs = append(diffs, fmt.Sprintf("JobSet %s resourceVersion %s, want %s", name, g.ResourceVersion, w.ResourceVersion))
		case !apiequality.Semantic.DeepEqual(g.Status, w.Status):
			gj, _ := json.Marshal(g.Status)
			wj, _ := json.Marshal(w.Status)
			diffs = append(diffs, fmt.Sprintf("JobSet %s status\n  %s\nwant\n  %s", name, gj, wj))
		}
	}
	for name := range got.jobsets {
		if _, ok := want.jobsets[name]; !ok {
			diffs = append(diffs, "unexpected JobSet "+name)
		}
	}
	return diffs
}

// sameUIDs reports the objects of want that are gone or have another UID.
func sameUIDs(kind string, want, got map[string]types.UID) []string {
	var diffs []string
	for name, uid := range want {
		if got[name] != uid {
			diffs = append(diffs, fmt.Sprintf("%s %s has uid %q, want %s (recreated or gone)", kind, name, got[name], uid))
		}
	}
	return diffs
}

// runServerBinary runs `jobset-apiserver args...` and returns its output.
func runServerBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// terminate stops a component of the stack with SIGTERM, as a kubelet
// stops a pod, and waits until it has exited.
func terminate(t *testing.T, p *localcluster.Process) {
	t.Helper()
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping %s: %v", p.Component, err)
	}
	eventually(t, 90*time.Second, p.Component+" to exit after SIGTERM", func(context.Context) (bool, error) {
		return !p.Alive(), nil
	})
}

// TestBackupAndRestore backs the JobSet store up while JobSets run, destroys
// it (the server stopped, its data directory removed), restores it and
// starts the server again: every JobSet is back as it was at the snapshot,
// the controller carries on with the Jobs and pods it had (same UIDs) and
// with the restored restart counters, and a JobSet created after the
// snapshot is gone with its Jobs. The same snapshot restored into a fresh
// etcd process serves the same JobSets to a jobset-apiserver using it as
// its external etcd.
func TestBackupAndRestore(t *testing.T) {
	// Not parallel: the JobSet API is down while the store is restored.
	ns := namespace(t)
	ctx := context.Background()
	createJobSet(t, runningJobSet(ns, "steady", replicatedJob("workers", 2, 2, "")))
	flaky := runningJobSet(ns, "flaky", replicatedJob("workers", 2, 1, ""))
	flaky.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 5}
	createJobSet(t, flaky)
	waitJobs(t, ns, "flaky", 2, "0")
	failOnePod(t, ns, "flaky-workers-0")
	waitJobs(t, ns, "flaky", 2, "1")
	for _, name := range []string{"steady", "flaky"} {
		waitStatus(t, ns, name, "every Job ready", 3*time.Minute, func(js *v1alpha2.JobSet) bool {
			return rjStatus(js, "workers").Ready == 2
		})
	}
	var before storeState
	eventually(t, 2*time.Minute, "4 Jobs and 6 running pods, none being deleted", func(ctx context.Context) (bool, error) {
		s, err := readStoreState(ctx, cluster.jobsets, ns)
		before = s
		return err == nil && len(s.jobs) == 4 && len(s.pods) == 6, nil
	})
	if js := before.jobsets["flaky"]; js.Status.Restarts != 1 || ptr.Deref(js.Status.ExecutionAttempts, 0) != 1 {
		t.Fatalf("flaky before the backup: restarts %d, executionAttempts %d; want 1 and 1", js.Status.Restarts, ptr.Deref(js.Status.ExecutionAttempts, 0))
	}

	server, err := stack.Process("jobset-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	bin := server.Args[0]
	dataDir := flagValue(server.Args, "embedded-etcd-dir")
	if dataDir == "" {
		t.Fatalf("jobset-apiserver does not run on an embedded etcd: %v", server.Args)
	}
	backup := filepath.Join(t.TempDir(), "jobsets.db")
	start := time.Now()
	out := runServerBinary(t, bin, "snapshot", "save", backup, "--embedded-etcd-dir="+dataDir)
	t.Logf("snapshot save took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	t.Logf("%s", strings.TrimSpace(runServerBinary(t, bin, "snapshot", "status", backup)))
	// The baseline is the state in the snapshot: nothing may have changed
	// while it was taken.
	atSnapshot, err := readStoreState(ctx, cluster.jobsets, ns)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := sameJobSets(before, atSnapshot); len(diffs) > 0 {
		t.Fatalf("the JobSets changed while the snapshot was taken, so it is not known what it holds:\n%s", strings.Join(diffs, "\n"))
	}
	// Saving over an existing backup is refused.
	if out, err := exec.Command(bin, "snapshot", "save", backup, "--embedded-etcd-dir="+dataDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "already exists") {
		t.Errorf("snapshot save over an existing file: %v\n%s", err, out)
	}

	// Written after the snapshot: lost by the restore, and its Jobs then
	// have no owner.
	createJobSet(t, runningJobSet(ns, "late", replicatedJob("workers", 1, 1, "")))
	waitJobs(t, ns, "late", 1, "0")

	// Destroy the store.
	terminate(t, server)
	stopped := true
	t.Cleanup(func() {
		if !stopped {
			return
		}
		// Leave a serving jobset-apiserver for the tests that follow.
		if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
			_ = exec.Command(bin, "snapshot", "restore", backup, "--data-dir="+dataDir).Run()
		}
		if _, err := stack.Restart(server, "after "+t.Name()); err != nil {
			t.Errorf("restarting jobset-apiserver: %v", err)
		}
	})
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kube.Discovery().ServerResourcesForGroupVersion("jobset.x-k8s.io/v1alpha2"); err == nil {
		t.Error("the JobSet API still answers discovery with its server stopped")
	}

	// Restore and start.
	start = time.Now()
	out = runServerBinary(t, bin, "snapshot", "restore", backup, "--data-dir="+dataDir)
	t.Logf("snapshot restore took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if _, err := stack.Restart(server, "restored by "+t.Name()); err != nil {
		t.Fatal(err)
	}
	stopped = false
	var after storeState
	eventually(t, 3*time.Minute, "the JobSet API to serve again", func(ctx context.Context) (bool, error) {
		s, err := readStoreState(ctx, cluster.jobsets, ns)
		after = s
		return err == nil, nil
	})
	if diffs := sameJobSets(before, after); len(diffs) > 0 {
		t.Errorf("JobSets after the restore:\n%s", strings.Join(diffs, "\n"))
	}
	list, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var listRV, lastRV int64
	fmt.Sscan(list.ResourceVersion, &listRV)
	fmt.Sscan(before.jobsets["flaky"].ResourceVersion, &lastRV)
	if listRV < lastRV+1_000_000_000 {
		t.Errorf("list resourceVersion after the restore %d, want past %d by the revision bump (10^9)", listRV, lastRV)
	}

	// The controller works on the restored store: a new JobSet gets its
	// Jobs, and a failure of flaky restarts it once more, counting from the
	// restored counters.
	createJobSet(t, runningJobSet(ns, "after", replicatedJob("workers", 1, 1, "")))
	waitJobs(t, ns, "after", 1, "0")
	failOnePod(t, ns, "flaky-workers-1")
	waitJobs(t, ns, "flaky", 2, "2")
	js := waitStatus(t, ns, "flaky", "restarts 2", 2*time.Minute, func(js *v1alpha2.JobSet) bool { return js.Status.Restarts >= 2 })
	if js.Status.Restarts != 2 || ptr.Deref(js.Status.ExecutionAttempts, 0) != 2 {
		t.Errorf("flaky after one more failure: restarts %d, executionAttempts %d; want 2 and 2", js.Status.Restarts, ptr.Deref(js.Status.ExecutionAttempts, 0))
	}
	// By now the controller has acted after relisting: steady's Jobs and
	// pods are those it had before, none recreated.
	now, err := readStoreState(ctx, cluster.jobsets, ns)
	if err != nil {
		t.Fatal(err)
	}
	steadyJobs := map[string]types.UID{}
	steadyPods := map[string]types.UID{}
	for name, uid := range before.jobs {
		if strings.HasPrefix(name, "steady-") {
			steadyJobs[name] = uid
		}
	}
	for name, uid := range before.pods {
		if strings.HasPrefix(name, "steady-") {
			steadyPods[name] = uid
		}
	}
	diffs := append(sameUIDs("Job", steadyJobs, now.jobs), sameUIDs("pod", steadyPods, now.pods)...)
	if s := now.jobsets["steady"]; s == nil || !apiequality.Semantic.DeepEqual(s.Status, before.jobsets["steady"].Status) {
		diffs = append(diffs, "steady's status changed after the restore")
	}
	if len(diffs) > 0 {
		t.Errorf("after the controller resynced:\n%s", strings.Join(diffs, "\n"))
	}
	if _, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "late", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("JobSet late, created after the snapshot: %v, want NotFound", err)
	}
	eventually(t, 3*time.Minute, "the garbage collector to delete the Jobs of late", func(ctx context.Context) (bool, error) {
		jobs, err := childJobs(ctx, ns, "late")
		return err == nil && len(jobs) == 0, nil
	})

	t.Run("ExternalEtcd", func(t *testing.T) {
		restoreIntoExternalEtcd(t, bin, server, backup, ns, before)
	})
}

// restoreIntoExternalEtcd restores backup as the data of a new etcd member
// run by the etcd binary of the stack, starts a second jobset-apiserver on
// it as its external etcd (not registered with kube-apiserver, so that the
// controller does not act on it), and checks it serves the JobSets of want.
func restoreIntoExternalEtcd(t *testing.T, bin string, server *localcluster.Process, backup, ns string, want storeState) {
	etcdBin := filepath.Join(filepath.Dir(bin), "etcd")
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("the etcd binary: %v", err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "etcd")
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", freeLoopbackPort(t))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", freeLoopbackPort(t))
	runServerBinary(t, bin, "snapshot", "restore", backup, "--data-dir="+data,
		"--name=restored", "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=restored="+peerURL, "--initial-cluster-token=jobsets")

	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer etcdLog.Close()
	etcd := exec.Command(etcdBin, "--name=restored", "--data-dir="+data,
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=restored="+peerURL, "--initial-cluster-token=jobsets", "--log-level=warn")
	etcd.Stdout, etcd.Stderr = etcdLog, etcdLog
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = etcd.Process.Kill()
		_ = etcd.Wait()
		if t.Failed() {
			logs, _ := os.ReadFile(etcdLog.Name())
			t.Logf("etcd log:\n%s", logs)
		}
	})
	eventually(t, time.Minute, "the restored etcd to be healthy", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	// The stack's command line, on another port and on the external etcd.
	port := freeLoopbackPort(t)
	args := []string{"--secure-port=" + fmt.Sprint(port), "--etcd-servers=" + clientURL}
	for _, a := range server.Args[1:] {
		if !strings.HasPrefix(a, "--secure-port=") && !strings.HasPrefix(a, "--embedded-etcd-") {
			args = append(args, a)
		}
	}
	apiLog, err := os.Create(filepath.Join(dir, "jobset-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer apiLog.Close()
	api := exec.Command(bin, args...)
	api.Stdout, api.Stderr = apiLog, apiLog
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = api.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			_ = api.Process.Kill()
			<-done
		}
		if t.Failed() {
			logs, _ := os.ReadFile(apiLog.Name())
			t.Logf("jobset-apiserver log:\n%s", logs)
		}
	})
	cfg := rest.CopyConfig(cluster.config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got storeState
	eventually(t, 3*time.Minute, "jobset-apiserver on the restored external etcd to serve", func(ctx context.Context) (bool, error) {
		s, err := readStoreState(ctx, client, ns)
		got = s
		return err == nil, nil
	})
	if diffs := sameJobSets(want, got); len(diffs) > 0 {
		t.Errorf("JobSets served from the restored external etcd:\n%s", strings.Join(diffs, "\n"))
	}
}
