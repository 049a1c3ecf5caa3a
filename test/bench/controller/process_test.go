package controller

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/benchutil"
	"github.com/nativejobset/jobset/test/localcluster"
)

// controllerCPUSeconds is the controller's user+system CPU time so far.
func controllerCPUSeconds(b *testing.B) float64 {
	b.Helper()
	pid, err := cluster.PID("jobset-controller")
	if err != nil {
		b.Fatalf("controller pid: %v", err)
	}
	cpu, err := benchutil.ProcessCPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// clusterCPUSeconds is the CPU time so far of every process of the local
// cluster (by component, from its pid files) and of this benchmark.
func clusterCPUSeconds() map[string]float64 {
	out := map[string]float64{}
	if cpu, err := benchutil.ProcessCPUSeconds(os.Getpid()); err == nil {
		out["benchmark process"] = cpu
	}
	files, _ := filepath.Glob(filepath.Join(cluster.LocalDir, "pids", "*.pid"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if pid, err := cluster.PID(name); err == nil {
			if cpu, err := benchutil.ProcessCPUSeconds(pid); err == nil {
				out[name] = cpu
			}
		}
	}
	return out
}

// restartController stops the stack's jobset-controller (SIGTERM: it
// releases its leader lease) and starts it again with the same command
// line, with each flag of set replacing the flag of that name, recorded
// in the pid file as hack/local-up.sh does so that hack/local-down.sh
// stops it. It returns once the new process leads and reconciles (a probe
// JobSet got its Job).
func restartController(b *testing.B, set ...string) {
	b.Helper()
	pidFile := filepath.Join(cluster.LocalDir, "pids", "jobset-controller.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		b.Fatal(err)
	}
	var pid int
	var start string
	if _, err := fmt.Sscan(string(data), &pid, &start); err != nil {
		b.Fatalf("parsing %q: %v", data, err)
	}
	if now, err := localcluster.ProcessStartTime(pid); err != nil || now != start {
		b.Fatalf("jobset-controller pid %d is not the recorded process", pid)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		b.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	for _, flag := range set {
		name, _, _ := strings.Cut(flag, "=")
		kept := args[:1]
		for _, a := range args[1:] {
			if a != name && !strings.HasPrefix(a, name+"=") {
				kept = append(kept, a)
			}
		}
		args = append(kept, flag)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		b.Fatalf("stopping jobset-controller: %v", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			now, err := localcluster.ProcessStartTime(pid)
			return err != nil || now != start, nil
		})
	if err != nil {
		b.Fatalf("jobset-controller pid %d did not exit", pid)
	}
	logPath := filepath.Join(cluster.LocalDir, "logs", "jobset-controller.log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting jobset-controller (restarted by %s)\n%s\n",
		time.Now().UTC().Format(time.RFC3339), b.Name(), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting jobset-controller: %v", err)
	}
	newPID := cmd.Process.Pid
	_ = cmd.Process.Release()
	newStart, err := localcluster.ProcessStartTime(newPID)
	if err != nil {
		b.Fatalf("jobset-controller exited right after start; see %s", logPath)
	}
	exe, err := filepath.EvalSymlinks(args[0])
	if err != nil {
		exe = args[0]
	}
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d %s %s\n", newPID, newStart, exe)), 0o644); err != nil {
		b.Fatal(err)
	}
	waitReconciling(b)
}

// waitReconciling creates a one-Job JobSet in a namespace of its own and
// waits for its Job: the controller leads and its caches synced.
func waitReconciling(b *testing.B) {
	b.Helper()
	ns := fmt.Sprintf("probe-%d", time.Now().UnixNano()%1000000)
	if out, err := cluster.Kubectl("", "create", "namespace", ns); err != nil {
		b.Fatalf("creating namespace: %v\n%s", err, out)
	}
	defer func() { _, _ = cluster.Kubectl("", "delete", "namespace", ns, "--wait=false") }()
	js := &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: v1alpha2.JobSetSpec{ReplicatedJobs: []v1alpha2.ReplicatedJob{{
			Name: "w", Replicas: ptr.To(int32(1)),
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
		}}},
	}
	if _, err := cluster.JobSets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), js, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitJobCount(b, ns, v1alpha2.JobSetNameKey, 1)
}

// saveCPUProfile records the controller's CPU profile over d into
// <cluster dir>/controller-cpu-<name>.pprof when it serves /debug/pprof
// (--profiling); it reports whether it did.
func saveCPUProfile(b *testing.B, name string, d time.Duration) bool {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", controllerMetricsURL(), int(d.Seconds()))
	resp, err := (&http.Client{Timeout: d + time.Minute}).Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	path := filepath.Join(cluster.LocalDir, "controller-cpu-"+name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.ReadFrom(resp.Body); err != nil {
		return false
	}
	b.Logf("CPU profile written to %s", path)
	return true
}
