package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The pid files follow hack/lib/local.sh: "<pid> <start time> <executable>",
// so that hack/local-down.sh and this package stop each other's processes
// and neither ever signals a process it did not start (a reused pid has
// another start time).

// startTime is the kernel's start time of pid in clock ticks since boot
// (field 22 of /proc/<pid>/stat); a zombie counts as gone.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start after the last ")".
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	if fields[0] == "Z" {
		return "", fmt.Errorf("process %d has exited", pid)
	}
	return fields[19], nil
}

// process is one long-running program of the node, logged to
// logs/<name>.log and recorded in pids/<name>.pid.
type process struct {
	name string
	argv []string
	env  []string // added to this process's environment
}

// start runs p in a session of its own, detached from this program.
func (c *Config) start(p process) error {
	if pid, ok := c.running(p.name); ok {
		return fmt.Errorf("%s is already running (pid %d); stop the node first", p.name, pid)
	}
	logPath := filepath.Join(c.logDir(), p.name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting %s\n%s\n", time.Now().UTC().Format(time.RFC3339), p.name, strings.Join(p.argv, " "))
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devNull.Close()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Start returns once the exec has happened, so /proc/<pid>/exe is the
	// program's own.
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	st, err := startTime(pid)
	if err != nil {
		return fmt.Errorf("%s exited right after start; see %s", p.name, logPath)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	record := fmt.Sprintf("%d %s %s\n", pid, st, exe)
	if err := os.WriteFile(c.pidFile(p.name), []byte(record), 0o644); err != nil {
		return err
	}
	_ = cmd.Process.Release()
	c.logf("started %s (pid %d, log %s)", p.name, pid, logPath)
	return nil
}

// running reports the pid of a component started by us that still runs.
func (c *Config) running(name string) (int, bool) {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, false
	}
	if st, err := startTime(pid); err != nil || st != f[1] {
		return 0, false
	}
	// Also the executable, when the kernel still tells it (it does not
	// while a process exits, which still counts as running).
	if len(f) >= 3 {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(exe, " (deleted)") != f[2] {
			return 0, false
		}
	}
	return pid, true
}

// stop sends SIGTERM, then SIGKILL after timeout, and removes the pid file
// once the process is gone.
func (c *Config) stop(name string, timeout time.Duration) error {
	pid, ok := c.running(name)
	if !ok {
		_ = os.Remove(c.pidFile(name))
		return nil
	}
	c.logf("stopping %s (pid %d)", name, pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !c.waitGone(name, timeout) {
		c.logf("%s did not stop within %s after SIGTERM; sending SIGKILL", name, timeout)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !c.waitGone(name, 5*time.Second) {
			return fmt.Errorf("%s (pid %d) still runs after SIGKILL", name, pid)
		}
	}
	return os.Remove(c.pidFile(name))
}

func (c *Config) waitGone(name string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if _, ok := c.running(name); !ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls ready every half second until it succeeds, the component
// exits, or the configured wait passes; the error names the log to read.
func (c *Config) waitFor(name, what string, ready func() error) error {
	deadline := time.Now().Add(c.Wait)
	for {
		err := ready()
		if err == nil {
			c.logf("%s: ok", what)
			return nil
		}
		logPath := filepath.Join(c.logDir(), name+".log")
		if _, ok := c.running(name); !ok {
			return fmt.Errorf("%s exited while waiting for %s (last error: %v); read %s", name, what, err, logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %v; read %s", c.Wait, what, err, logPath)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// run runs a short command and returns its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
