// Package proc starts, finds and stops the local cluster's long-running
// programs. Each runs in a session of its own, logs to <logs>/<name>.log and
// is recorded in <pids>/<name>.pid as "<pid> <start time> <executable>".
// The start time (and the executable, while the kernel tells it) identifies
// the process for good: a pid reused by another program has another start
// time, so nothing here ever signals a process it did not start.
package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dirs says where the programs' logs and pid files live, and where to
// report what happens.
type Dirs struct {
	Logs string
	Pids string
	Logf func(format string, args ...any)
}

// Process is one long-running program.
type Process struct {
	Name string
	Argv []string
	Env  []string // added to this program's environment
	Dir  string   // working directory; empty for ours
}

// LogPath is the log file of the named program.
func (d Dirs) LogPath(name string) string { return filepath.Join(d.Logs, name+".log") }

// PidFile is the pid file of the named program.
func (d Dirs) PidFile(name string) string { return filepath.Join(d.Pids, name+".pid") }

func (d Dirs) logf(format string, args ...any) {
	if d.Logf != nil {
		d.Logf(format, args...)
	}
}

// StartTime is the kernel's start time of pid in clock ticks since boot
// (field 22 of /proc/<pid>/stat); a zombie counts as gone.
func StartTime(pid int) (string, error) {
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

// Start runs p detached from this program: in a session of its own (a
// Ctrl-C in the terminal reaches only us, and we stop the cluster in
// order), with no standard input, its output appended to its log.
func (d Dirs) Start(p Process) error {
	if pid, ok := d.Running(p.Name); ok {
		return fmt.Errorf("%s is already running (pid %d); stop it first", p.Name, pid)
	}
	for _, dir := range []string{d.Logs, d.Pids} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	logPath := d.LogPath(p.Name)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting %s\n%s\n", time.Now().UTC().Format(time.RFC3339), p.Name, quoteArgs(p.Argv))
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devNull.Close()
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Dir = p.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Start returns once the exec has happened, so /proc/<pid>/exe is the
	// program's own.
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	pid := cmd.Process.Pid
	st, err := StartTime(pid)
	if err != nil {
		return fmt.Errorf("%s exited right after start; see %s", p.Name, logPath)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fmt.Errorf("%s exited right after start; see %s", p.Name, logPath)
	}
	record := fmt.Sprintf("%d %s %s\n", pid, st, exe)
	if err := os.WriteFile(d.PidFile(p.Name), []byte(record), 0o644); err != nil {
		return err
	}
	// Not our child to wait for: the pid file is how we find it again.
	_ = cmd.Process.Release()
	d.logf("started %s (pid %d, log %s)", p.Name, pid, logPath)
	return nil
}

// quoteArgs writes argv for the log, quoting what a shell would split.
func quoteArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// Running reports the pid of the named program while it is still the
// process we started.
func (d Dirs) Running(name string) (int, bool) {
	data, err := os.ReadFile(d.PidFile(name))
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
	if st, err := StartTime(pid); err != nil || st != f[1] {
		return 0, false
	}
	// Also the executable, when the kernel still tells it (it does not
	// while a process exits, which still counts as running). A binary
	// replaced by a rebuild reads as "<path> (deleted)".
	if len(f) >= 3 {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(exe, " (deleted)") != f[2] {
			return 0, false
		}
	}
	return pid, true
}

// Recorded lists the names of every program with a pid file.
func (d Dirs) Recorded() []string {
	entries, _ := os.ReadDir(d.Pids)
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".pid"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	return names
}

// Stop sends SIGTERM, then SIGKILL after timeout, and removes the pid file
// once the process is gone. A pid file of a process that is gone (or whose
// pid now belongs to another) is removed without signalling anything.
func (d Dirs) Stop(name string, timeout time.Duration) error {
	pid, ok := d.Running(name)
	if !ok {
		if err := os.Remove(d.PidFile(name)); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	d.logf("stopping %s (pid %d)", name, pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !d.waitGone(name, timeout) {
		d.logf("%s did not stop within %s after SIGTERM; sending SIGKILL", name, timeout)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !d.waitGone(name, 5*time.Second) {
			return fmt.Errorf("%s (pid %d) is still running after SIGKILL; its pid file is kept", name, pid)
		}
	}
	return os.Remove(d.PidFile(name))
}

func (d Dirs) waitGone(name string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if _, ok := d.Running(name); !ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitFor polls ready every half second until it succeeds, the named
// program exits, timeout passes or ctx ends. The error quotes the end of
// the program's log and names the file to read.
func (d Dirs) WaitFor(ctx context.Context, name, what string, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			d.logf("%s: ok", what)
			return nil
		}
		if _, ok := d.Running(name); !ok {
			return fmt.Errorf("%s exited while waiting for %s (last error: %v)%s", name, what, err, d.tail(name))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %v%s", timeout, what, err, d.tail(name))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tail is the last lines of a program's log, for an error message.
func (d Dirs) tail(name string) string {
	const lines = 30
	path := d.LogPath(name)
	data, err := os.ReadFile(path)
	if err != nil {
		return "; read " + path
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("\n---- last lines of %s:\n%s\n---- read %s", path, strings.Join(all, "\n"), path)
}
