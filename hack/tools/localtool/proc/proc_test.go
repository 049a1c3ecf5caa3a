package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testDirs(t *testing.T) Dirs {
	dir := t.TempDir()
	return Dirs{Logs: filepath.Join(dir, "logs"), Pids: filepath.Join(dir, "pids"), Logf: t.Logf}
}

// A program is recorded with its start time and executable, and Stop
// escalates to SIGKILL for one that ignores SIGTERM.
func TestStartStop(t *testing.T) {
	d := testDirs(t)
	if err := d.Start(Process{Name: "stubborn", Argv: []string{"/bin/sh", "-c", "trap '' TERM; echo ignoring TERM; while :; do sleep 0.1; done"}}); err != nil {
		t.Fatal(err)
	}
	// Only once the trap is set does SIGTERM go unheeded.
	if err := d.WaitFor(context.Background(), "stubborn", "the trap", 10*time.Second, func() error {
		data, _ := os.ReadFile(d.LogPath("stubborn"))
		if !strings.Contains(string(data), "ignoring TERM") {
			return errors.New("no output yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pid, ok := d.Running("stubborn")
	if !ok {
		t.Fatal("the process is not recorded as running")
	}
	data, _ := os.ReadFile(d.PidFile("stubborn"))
	if f := strings.Fields(string(data)); len(f) != 3 || !strings.HasSuffix(f[2], "sh") && !strings.HasSuffix(f[2], "dash") {
		t.Errorf("pid file %q: want <pid> <start time> <executable>", data)
	}
	if got := d.Recorded(); len(got) != 1 || got[0] != "stubborn" {
		t.Errorf("Recorded() = %v", got)
	}
	if err := d.Start(Process{Name: "stubborn", Argv: []string{"/bin/true"}}); err == nil {
		t.Error("starting a program that runs succeeded")
	}
	if err := d.Stop("stubborn", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := StartTime(pid); err == nil {
		t.Errorf("pid %d still runs after Stop", pid)
	}
	if _, err := os.Stat(d.PidFile("stubborn")); !os.IsNotExist(err) {
		t.Error("the pid file is left behind")
	}
	if err := d.Stop("stubborn", time.Second); err != nil {
		t.Errorf("stopping what is stopped: %v", err)
	}
}

// A pid file whose pid belongs to another process (another start time) is
// not ours: Running says so and Stop removes the file without a signal.
func TestReusedPidIsNotOurs(t *testing.T) {
	d := testDirs(t)
	if err := os.MkdirAll(d.Pids, 0o755); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	if err := os.WriteFile(d.PidFile("other"), []byte(strconv.Itoa(self)+" 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Running("other"); ok {
		t.Fatal("a pid with another start time counts as running")
	}
	if err := d.Stop("other", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.PidFile("other")); !os.IsNotExist(err) {
		t.Error("the stale pid file is left behind")
	}
}

// A program that exits while being waited for fails the wait at once, with
// the end of its log in the error.
func TestWaitForAProgramThatExits(t *testing.T) {
	d := testDirs(t)
	// It exits once the test opens the gate, so that Start sees it run.
	gate := filepath.Join(t.TempDir(), "gate")
	if err := d.Start(Process{Name: "brief", Argv: []string{"/bin/sh", "-c", "echo bad flag; while [ ! -e " + gate + " ]; do sleep 0.05; done; exit 3"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.WaitFor(context.Background(), "brief", "readiness", time.Minute, func() error { return errors.New("not ready") })
	if err == nil || !strings.Contains(err.Error(), "brief exited") || !strings.Contains(err.Error(), "bad flag") {
		t.Fatalf("WaitFor = %v; want an error naming the exit and quoting the log", err)
	}
}

func TestQuoteArgs(t *testing.T) {
	got := quoteArgs([]string{"/bin/kube", "--a=b", "--sel=k in (x)", "it's"})
	want := `/bin/kube --a=b '--sel=k in (x)' 'it'\''s'`
	if got != want {
		t.Errorf("quoteArgs = %s, want %s", got, want)
	}
}
