package node

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// What the node leaves behind when its programs stop: container processes
// (runc's containers outlive containerd and their shims), the mounts of
// container root filesystems, volumes and network namespaces, and the
// kubelet's cgroups. Each is found by where the node put it, never by name
// alone, so nothing of another program is touched.

// killContainers kills every process in the kubelet's cgroup root (pods'
// sandboxes and containers) until none is left.
func (c *Config) killContainers() error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := c.cgroupPids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survive SIGKILL", pids, c.cgroupRoot())
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *Config) cgroupPids() []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, c.cgroupRoot())
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// killShims kills the runc shims that our containerd started: their
// executable is ours and their command line names our containerd's socket.
func (c *Config) killShims() error {
	shim, err := filepath.EvalSymlinks(c.bin("containerd-shim-runc-v2"))
	if err != nil {
		return nil // never built, so never run
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var left []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != shim {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmdline, []byte(c.containerdSocket())) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		left = append(left, pid)
	}
	for _, pid := range left {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := proc.StartTime(pid); err != nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("shim %d survives SIGKILL", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// unmountAll detaches every mount below the node's directory, deepest first.
func (c *Config) unmountAll() error {
	prefix := c.dir() + "/"
	for round := 0; round < 5; round++ {
		mounts, err := mountPoints()
		if err != nil {
			return err
		}
		var ours []string
		for _, m := range mounts {
			if strings.HasPrefix(m, prefix) {
				ours = append(ours, m)
			}
		}
		if len(ours) == 0 {
			return nil
		}
		sort.Slice(ours, func(i, j int) bool { return len(ours[i]) > len(ours[j]) })
		for _, m := range ours {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	mounts, _ := mountPoints()
	var left []string
	for _, m := range mounts {
		if strings.HasPrefix(m, prefix) {
			left = append(left, m)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
	return nil
}

// mountPoints reads the mount points of this mount namespace; the kernel
// escapes spaces and the like as \ooo.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, unescapeMount(f[4]))
	}
	return out, nil
}

func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the kubelet's cgroup root, deepest first.
func (c *Config) removeCgroups() error {
	var errs []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, c.cgroupRoot())
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Sprintf("rmdir %s: %v", d, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// deleteNodeObject removes the Node from the API when the API still runs, so
// that its pods are collected instead of staying bound to a node that is
// gone.
func (c *Config) deleteNodeObject() {
	if _, err := os.Stat(filepath.Join(c.LocalDir, "kubeconfig")); err != nil {
		return
	}
	if _, err := c.kubectl("", "delete", "node", c.Name, "--ignore-not-found", "--wait=false"); err == nil {
		c.logf("deleted node %s from the API", c.Name)
	}
}
