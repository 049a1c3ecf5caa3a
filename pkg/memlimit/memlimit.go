// Package memlimit fits a Go process to its container's memory limit: it
// sets the Go runtime's soft memory limit (GOMEMLIMIT) below the cgroup's
// hard limit, so that the garbage collector works harder before the kernel
// kills the process, and tells the caller what the limit is. It also
// gives each binary its own garbage collector target unless GOGC is set.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// SoftShare is the share of the container's limit given to the Go runtime
// as its soft limit: the rest covers memory the runtime does not count
// (thread stacks, the embedded etcd's memory-mapped database pages).
const SoftShare = 0.9

// noLimit is what cgroup v1 reports for an unlimited group (a page-aligned
// maximum int64); anything at least this large means no limit.
const noLimit = int64(1) << 62

// Limit reads the memory limit of the cgroup the process runs in, under
// root (normally "/"): cgroup v2's memory.max, else cgroup v1's
// memory.limit_in_bytes. It returns 0 when there is none.
func Limit(root string) (int64, error) {
	v2, v1, err := cgroupPaths(root)
	if err != nil {
		return 0, err
	}
	for _, p := range []string{v2, v1} {
		if p == "" {
			continue
		}
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a byte count", p, s)
		}
		if n <= 0 || n >= noLimit {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}

// cgroupPaths finds the memory limit files of this process's cgroups from
// <root>/proc/self/cgroup: "0::<path>" for v2, "<id>:memory:<path>" (or a
// controller list holding memory) for v1. Inside a container the group's
// own path is usually not mounted; the mount's root then is the group.
func cgroupPaths(root string) (v2, v1 string, err error) {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	pick := func(mount, group, file string) string {
		if p := filepath.Join(root, mount, group, file); exists(p) {
			return p
		}
		return filepath.Join(root, mount, file)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = pick("sys/fs/cgroup", parts[2], "memory.max")
		case hasController(parts[1], "memory"):
			v1 = pick("sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	return v2, v1, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Apply sets the Go runtime's soft memory limit to SoftShare of the
// container's limit, unless GOMEMLIMIT is set (the runtime has read it
// already, and an operator's choice wins). It returns the container's
// limit (0 when there is none) and the soft limit it set (0 when it set
// none).
func Apply(root string) (limit, soft int64, err error) {
	limit, err = Limit(root)
	if err != nil || limit == 0 {
		return limit, 0, err
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return limit, 0, nil
	}
	soft = int64(float64(limit) * SoftShare)
	debug.SetMemoryLimit(soft)
	return limit, soft, nil
}

// DefaultGCPercent sets the garbage collector's target to percent unless
// GOGC is set (an operator's choice wins), and reports whether it did.
func DefaultGCPercent(percent int) bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}
