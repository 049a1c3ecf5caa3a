package etcdsnapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Scheduled backups are named after the UTC time they were taken, so that
// the names sort by age and a directory of them needs no index.
const (
	backupPrefix     = "jobsets-"
	backupSuffix     = ".db"
	backupTimeLayout = "20060102T150405Z"
)

// BackupName is the file name of a scheduled backup taken at t.
func BackupName(t time.Time) string {
	return backupPrefix + t.UTC().Format(backupTimeLayout) + backupSuffix
}

// Backups lists the scheduled backups in dir, oldest first. Other files,
// and the temporary files of a snapshot being written, are not listed.
func Backups(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, backupPrefix) || !strings.HasSuffix(name, backupSuffix) {
			continue
		}
		stamp := strings.TrimSuffix(strings.TrimPrefix(name, backupPrefix), backupSuffix)
		if _, err := time.Parse(backupTimeLayout, stamp); err != nil {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Prune removes the oldest scheduled backups in dir until at most keep are
// left, and returns the names it removed. keep must be at least 1: pruning
// never removes the newest backup.
func Prune(dir string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("keep must be at least 1, not %d", keep)
	}
	names, err := Backups(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for len(names) > keep {
		if err := os.Remove(filepath.Join(dir, names[0])); err != nil {
			return removed, fmt.Errorf("removing the old backup %s: %w", names[0], err)
		}
		removed = append(removed, names[0])
		names = names[1:]
	}
	if len(removed) > 0 {
		return removed, syncDir(dir)
	}
	return nil, nil
}
