package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// state is the state letter of /proc/<pid>/stat ("Z" for a zombie), or ""
// when the process is gone.
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces.
	_, rest, _ := strings.Cut(string(b[strings.LastIndexByte(string(b), ')'):]), " ")
	return rest[:1]
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestReap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waitFor(t, "the child to become a zombie", func() bool { return state(t, pid) == "Z" })
	if n := reap(); n != 1 {
		t.Errorf("reap() = %d, want 1", n)
	}
	if s := state(t, pid); s != "" {
		t.Errorf("after reap, the child is still there in state %q", s)
	}
	// No children left: reap returns at once.
	if n := reap(); n != 0 {
		t.Errorf("second reap() = %d, want 0", n)
	}
}

// TestProcess runs the built binary with a child that exits while pause
// runs, as an orphan would in a pod: pause must reap it, then exit 0 on
// the signal.
func TestProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command(goTool(), "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			// The shell starts a child that outlives it, prints the
			// child's PID and becomes pause (same PID), so the child is
			// pause's, exiting a second later.
			cmd := exec.Command("sh", "-c", `sleep 1 & echo $!; exec "$1"`, "sh", bin)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			// Only its parent can make a zombie go away.
			waitFor(t, "pause to reap its child", func() bool { return state(t, child) == "" })
			// reap ran, so Notify had: the signal is handled, not fatal.
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after %v: %v, want exit status 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("pause still runs 10s after %v", sig)
			}
		})
	}
}

func goTool() string {
	if r := runtime.GOROOT(); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}
