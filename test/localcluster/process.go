package localcluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
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
	if len(fields) < 20 || fields[0] == "Z" {
		return "", errors.New("process exited")
	}
	return fields[19], nil
}
