package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ProcessStartTime returns a process's start time in clock ticks after
// boot (field 22 of /proc/<pid>/stat), or an error when it is gone or a
// zombie. With the pid it names one process, even after pid reuse.
func ProcessStartTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	// The command name may hold spaces and parentheses: fields follow the last ") ".
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return "", errors.New("unparsable stat")
	}
	fields := strings.Fields(s[i+2:])
	if len(fields) < 20 || (fields[0] == "Z" && !threadsExiting(pid)) {
		return "", errors.New("process exited")
	}
	return fields[19], nil
}

// threadsExiting reports whether a zombie's other threads are still on their
// way out. The first thread of a killed Go process can be a zombie while the
// others still hold its open files, its listening sockets among them: a
// restart that binds the same port at that moment fails with "address
// already in use".
func threadsExiting(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(tasks) > 1
}

// Process is a running component of the stack as hack/local-up.sh records
// it in pids/<component>.pid ("<pid> <start time> <executable>"), with its
// command line.
type Process struct {
	Component string
	PID       int
	Start     string
	Exe       string
	Args      []string // argv[0] first
}

// Process reads a component's pid file and checks that the process it names
// is still that process.
func (c *Cluster) Process(component string) (*Process, error) {
	data, err := os.ReadFile(c.pidFile(component))
	if err != nil {
		return nil, err
	}
	p := &Process{Component: component}
	if _, err := fmt.Sscan(string(data), &p.PID, &p.Start, &p.Exe); err != nil {
		return nil, fmt.Errorf("parsing %q: %w", data, err)
	}
	if now, err := ProcessStartTime(p.PID); err != nil || now != p.Start {
		return nil, fmt.Errorf("%s (pid %d) is not running", component, p.PID)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
	if err != nil {
		return nil, err
	}
	p.Args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return p, nil
}

// Alive reports whether the recorded process still runs.
func (p *Process) Alive() bool {
	now, err := ProcessStartTime(p.PID)
	return err == nil && now == p.Start
}

// Kill sends SIGKILL to the process, if it still is the recorded one, and
// waits (at most a minute) until it is gone.
func (p *Process) Kill() error {
	if !p.Alive() {
		return fmt.Errorf("%s (pid %d) is no longer the recorded process", p.Component, p.PID)
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); p.Alive(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) still runs a minute after SIGKILL", p.Component, p.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Restart starts the component again with the command line of p, in its
// own session, appending to its log, and records it in the pid file as
// hack/local-up.sh does, so that hack/local-down.sh stops it.
func (c *Cluster) Restart(p *Process, why string) (*Process, error) {
	logPath := filepath.Join(c.LocalDir, "logs", p.Component+".log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s starting %s (%s)\n%s\n", time.Now().UTC().Format(time.RFC3339), p.Component, why, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", p.Component, err)
	}
	pid := cmd.Process.Pid
	// Not waited for: like every component, it outlives the test binary if
	// need be, and hack/local-down.sh stops it by its pid file.
	_ = cmd.Process.Release()
	start, err := ProcessStartTime(pid)
	if err != nil {
		return nil, fmt.Errorf("%s exited right after start; see %s", p.Component, logPath)
	}
	np := &Process{Component: p.Component, PID: pid, Start: start, Exe: p.Exe, Args: p.Args}
	record := fmt.Sprintf("%d %s %s\n", pid, start, p.Exe)
	if err := os.WriteFile(c.pidFile(p.Component), []byte(record), 0o644); err != nil {
		return nil, err
	}
	return np, nil
}

func (c *Cluster) pidFile(component string) string {
	return filepath.Join(c.LocalDir, "pids", component+".pid")
}

// StartProcess starts a component hack/local-up.sh does not start (say, a
// test's own etcd member) the way Restart starts a killed one: in its own
// session, logging to logs/<component>.log, with a pid file, so that
// Restart can start it again and hack/local-down.sh stops it. args[0] is
// the executable.
func (c *Cluster) StartProcess(component string, args []string, why string) (*Process, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: no command line", component)
	}
	// The pid file records the executable as the kernel reports it.
	exe, err := filepath.EvalSymlinks(args[0])
	if err != nil {
		return nil, err
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return nil, err
	}
	argv := append([]string{exe}, args[1:]...)
	return c.Restart(&Process{Component: component, Exe: exe, Args: argv}, why)
}

// Stop sends SIGTERM to the process, if it still is the recorded one, and
// waits until it is gone; after timeout it kills it (Kill).
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Alive() {
		return fmt.Errorf("%s (pid %d) is no longer the recorded process", p.Component, p.PID)
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); p.Alive(); {
		if time.Now().After(deadline) {
			if err := p.Kill(); err != nil && p.Alive() {
				return err
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
