package e2e

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/localcluster"
)

// controllerProcess is the running jobset-controller of the stack, as
// recorded by hack/local-up.sh in pids/jobset-controller.pid
// ("<pid> <start time> <executable>").
type controllerProcess struct {
	pid   int
	start string
	exe   string
	args  []string // the command line, argv[0] first
}

func controllerPidFile() string {
	return filepath.Join(cluster.localDir, "pids", "jobset-controller.pid")
}

// runningController reads the pid file and checks that the process it
// names is still that process.
func runningController(t *testing.T) *controllerProcess {
	t.Helper()
	data, err := os.ReadFile(controllerPidFile())
	if err != nil {
		t.Fatalf("reading the controller's pid file: %v", err)
	}
	var p controllerProcess
	if _, err := fmt.Sscan(string(data), &p.pid, &p.start, &p.exe); err != nil {
		t.Fatalf("parsing %q: %v", data, err)
	}
	if now, err := localcluster.ProcessStartTime(p.pid); err != nil || now != p.start {
		t.Fatalf("jobset-controller pid %d is not running (start %q, recorded %q, err %v)", p.pid, now, p.start, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
	if err != nil {
		t.Fatalf("reading the controller's command line: %v", err)
	}
	p.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return &p
}

// kill sends SIGKILL and waits until the process is gone.
func (p *controllerProcess) kill(t *testing.T) {
	t.Helper()
	if now, err := localcluster.ProcessStartTime(p.pid); err != nil || now != p.start {
		t.Fatalf("jobset-controller pid %d is no longer the recorded process", p.pid)
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing jobset-controller: %v", err)
	}
	eventually(t, 30*time.Second, "jobset-controller to exit", func(context.Context) (bool, error) {
		now, err := localcluster.ProcessStartTime(p.pid)
		return err != nil || now != p.start, nil
	})
}

// startController starts jobset-controller again with the same command
// line, in its own session, logging to the stack's log, and records it in
// the pid file the way hack/local-up.sh does, so hack/local-down.sh stops it.
func startController(t *testing.T, args []string) {
	t.Helper()
	logPath := filepath.Join(cluster.localDir, "logs", "jobset-controller.log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("opening %s: %v", logPath, err)
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting jobset-controller (restarted by %s)\n%s\n",
		time.Now().UTC().Format(time.RFC3339), t.Name(), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting jobset-controller: %v", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	start, err := localcluster.ProcessStartTime(pid)
	if err != nil {
		t.Fatalf("jobset-controller exited right after start; see %s", logPath)
	}
	exe, err := filepath.EvalSymlinks(args[0])
	if err != nil {
		exe = args[0]
	}
	record := fmt.Sprintf("%d %s %s\n", pid, start, exe)
	if err := os.WriteFile(controllerPidFile(), []byte(record), 0o644); err != nil {
		t.Fatalf("writing the pid file: %v", err)
	}
}

// TestControllerKilledDuringRestart kills jobset-controller as soon as the
// first Job of the next attempt appears, starts it again, and checks that
// the JobSet converges: every Job of attempt 1 exists exactly once, none
// was created twice, and the restart was counted once.
func TestControllerKilledDuringRestart(t *testing.T) {
	// Not parallel: the other tests would stall while no controller runs.
	ns := namespace(t)
	js := runningJobSet(ns, "phoenix", replicatedJob("workers", 4, 2, ""))
	js.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 3}
	createJobSet(t, js)
	// A second JobSet restarts at the same time with BlockingRecreate: the
	// new controller must keep its invariant too.
	blocking := runningJobSet(ns, "blocker", replicatedJob("workers", 3, 1, ""))
	blocking.Spec.FailurePolicy = &v1alpha2.FailurePolicy{MaxRestarts: 3, RestartStrategy: v1alpha2.BlockingRecreate}
	createJobSet(t, blocking)
	waitJobs(t, ns, "phoenix", 4, "0")
	waitJobs(t, ns, "blocker", 3, "0")
	ctrl := runningController(t)
	bw := watchJobs(t, ns, "blocker", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ == watch.Added && job.Labels[v1alpha2.RestartsKey] == "1" {
			if n := w.countAttempt("0"); n > 0 {
				t.Errorf("Job %s of attempt 1 created while %d Jobs of attempt 0 still exist", job.Name, n)
			}
		}
	})

	firstNew := make(chan struct{})
	signalled := false // only touched by the watch's callback
	w := watchJobs(t, ns, "phoenix", func(w *jobWatch, typ watch.EventType, job *batchv1.Job) {
		if typ == watch.Added && job.Labels[v1alpha2.RestartsKey] == "1" && !signalled {
			close(firstNew)
			signalled = true
		}
	})
	killed := false
	t.Cleanup(func() {
		if killed {
			startController(t, ctrl.args)
		}
	})

	// The last Job of attempt 1 is held back until the kill, so that the
	// kill lands mid-restart however fast the controller is.
	hold := stack.HoldJobCreates(t, ns, localcluster.HeldRestartJob("phoenix-workers-3", 1),
		localcluster.ProbeJob("phoenix-workers-3", map[string]string{v1alpha2.RestartsKey: "1"}))
	failPodWithCode(t, ns, "blocker-workers-0", otherExitCode)
	failPodWithCode(t, ns, "phoenix-workers-2", otherExitCode)
	select {
	case <-firstNew:
	case <-time.After(2 * time.Minute):
		t.Fatal("no Job of attempt 1 appeared")
	}
	ctrl.kill(t)
	killed = true
	jobs, err := childJobs(context.Background(), ns, "phoenix")
	if err != nil {
		t.Fatal(err)
	}
	atKill := 0
	for _, j := range jobs {
		if j.Labels[v1alpha2.RestartsKey] == "1" {
			atKill++
		}
	}
	t.Logf("killed the controller with %d of 4 Jobs of attempt 1 present", atKill)
	if atKill >= 4 {
		t.Fatalf("%d of 4 Jobs of attempt 1 existed at the kill: it did not land during the restart", atKill)
	}
	hold.Release()
	startController(t, ctrl.args)
	killed = false

	// The new controller first waits for the dead one's lease to expire.
	waitStatus(t, ns, "phoenix", "the restart to finish", 2*time.Minute, func(js *v1alpha2.JobSet) bool {
		c := meta.FindStatusCondition(js.Status.Conditions, string(v1alpha2.JobSetRestarting))
		return c != nil && c.Reason == "JobsReady"
	})
	jobs, err = childJobs(context.Background(), ns, "phoenix")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, j := range jobs {
		if j.Labels[v1alpha2.RestartsKey] != "1" || j.DeletionTimestamp != nil {
			t.Errorf("Job %s attempt %s deleting %v; want only live Jobs of attempt 1", j.Name, j.Labels[v1alpha2.RestartsKey], j.DeletionTimestamp != nil)
		}
		names[j.Name] = true
	}
	for i := 0; i < 4; i++ {
		if name := fmt.Sprintf("phoenix-workers-%d", i); !names[name] {
			t.Errorf("Job %s is missing", name)
		}
	}
	if len(jobs) != 4 {
		t.Errorf("%d Jobs, want 4", len(jobs))
	}
	w.await(t, "the watch to see the Jobs of attempt 1", func() bool { return w.countAttempt("1") == 4 })
	w.stop()
	for key, n := range w.added {
		if n > 1 {
			t.Errorf("Job %s was created %d times", key, n)
		}
		if strings.Contains(key, "@2") {
			t.Errorf("a Job of attempt 2 was created: %s", key)
		}
	}
	waitJobs(t, ns, "blocker", 3, "1")
	bw.await(t, "the watch to see the Jobs of attempt 1", func() bool { return bw.countAttempt("1") == 3 })
	bw.stop()
	for key, n := range bw.added {
		if n > 1 || strings.Contains(key, "@2") {
			t.Errorf("blocker: Job %s was created %d times", key, n)
		}
	}
	if got := getJobSet(t, ns, "blocker"); got.Status.Restarts != 1 {
		t.Errorf("blocker: restarts %d, want 1", got.Status.Restarts)
	}
	got := getJobSet(t, ns, "phoenix")
	if got.Status.Restarts != 1 || got.Status.RestartsCountTowardsMax != 1 || ptr.Deref(got.Status.ExecutionAttempts, 0) != 1 {
		t.Errorf("restarts %d towards max %d execution attempts %d, want 1/1/1",
			got.Status.Restarts, got.Status.RestartsCountTowardsMax, ptr.Deref(got.Status.ExecutionAttempts, 0))
	}
	if s := rjStatus(got, "workers"); s.Ready != 4 || s.Active != 4 {
		t.Errorf("workers status = %+v, want 4 ready and active", s)
	}
}
