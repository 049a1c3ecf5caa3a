package benchutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat (100 on every Linux architecture Go supports here).
const clockTicks = 100

// ProcessCPUSeconds is a process's user+system CPU time so far, from
// /proc/<pid>/stat.
func ProcessCPUSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis: utime and stime are fields 14
	// and 15 of the line, 12 and 13 after the name.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, s)
	}
	return (utime + stime) / clockTicks, nil
}

// ProcessRSSMiB is a process's resident set (VmRSS) in MiB. A figure it
// cannot read is an error, never 0: a 0 would pass every memory bound.
func ProcessRSSMiB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			kb, err := strconv.Atoi(fields[0])
			if err != nil || kb <= 0 {
				return 0, fmt.Errorf("bad VmRSS line %q in /proc/%d/status", line, pid)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// ProcessRSSSplit is a process's resident set in MiB split into anonymous
// memory (the Go heap, stacks) and file-backed pages (memory-mapped files
// such as an embedded etcd's database), from RssAnon and RssFile.
func ProcessRSSSplit(pid int) (anon, file float64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		for key, dst := range map[string]*float64{"RssAnon:": &anon, "RssFile:": &file} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				fields := strings.Fields(rest)
				if len(fields) == 0 {
					return 0, 0, fmt.Errorf("bad %s line %q in /proc/%d/status", key, line, pid)
				}
				kb, err := strconv.Atoi(fields[0])
				if err != nil {
					return 0, 0, fmt.Errorf("bad %s line %q in /proc/%d/status", key, line, pid)
				}
				*dst = float64(kb) / 1024
				found++
			}
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("no RssAnon and RssFile in /proc/%d/status", pid)
	}
	return anon, file, nil
}
