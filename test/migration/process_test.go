package migration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nativejobset/jobset/test/localcluster"
)

// controller is the stack's jobset-controller process as hack/local-up.sh
// records it in pids/jobset-controller.pid ("<pid> <start time> <exe>").
type controller struct {
	pid   int
	start string
	args  []string
}

func pidFile() string { return filepath.Join(stack.LocalDir, "pids", "jobset-controller.pid") }

// stopController kills the running jobset-controller (a JobSet served by
// the CRD is not its business) and returns its command line.
func stopController(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(pidFile())
	if err != nil {
		t.Fatal(err)
	}
	var p controller
	var exe string
	if _, err := fmt.Sscan(string(data), &p.pid, &p.start, &exe); err != nil {
		t.Fatalf("parsing %q: %v", data, err)
	}
	if now, err := localcluster.ProcessStartTime(p.pid); err != nil || now != p.start {
		t.Fatalf("jobset-controller pid %d is not running", p.pid)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
	if err != nil {
		t.Fatal(err)
	}
	p.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "jobset-controller to exit", func(context.Context) (bool, error) {
		now, err := localcluster.ProcessStartTime(p.pid)
		return err != nil || now != p.start, nil
	})
	return p.args
}

// startController starts jobset-controller with args, in its own session,
// and records it in the pid file so that hack/local-down.sh stops it.
func startController(t *testing.T, args []string) {
	t.Helper()
	logPath := filepath.Join(stack.LocalDir, "logs", "jobset-controller.log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting jobset-controller (after %s)\n", time.Now().UTC().Format(time.RFC3339), t.Name())
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	start, err := localcluster.ProcessStartTime(pid)
	if err != nil {
		t.Fatalf("jobset-controller exited at once; see %s", logPath)
	}
	exe, err := filepath.EvalSymlinks(args[0])
	if err != nil {
		exe = args[0]
	}
	if err := os.WriteFile(pidFile(), []byte(fmt.Sprintf("%d %s %s\n", pid, start, exe)), 0o644); err != nil {
		t.Fatal(err)
	}
}
