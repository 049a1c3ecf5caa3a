package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeRoot writes files (path → content) under a new directory.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLimit(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  int64
		err   string
	}{
		{"no cgroup file", nil, 0, ""},
		{"v2, group mounted at its path", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "1073741824\n",
			"sys/fs/cgroup/memory.max":                  "max\n",
		}, 1 << 30, ""},
		{"v2, the mount's root is the group", map[string]string{
			"proc/self/cgroup":         "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory.max": "536870912\n",
		}, 512 << 20, ""},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0, ""},
		{"v1", map[string]string{
			"proc/self/cgroup":                           "12:cpu,cpuacct:/a\n11:memory:/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20, ""},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup":                           "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0, ""},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, 0, "not a byte count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Limit(fakeRoot(t, c.files))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Limit: %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Limit = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup":         "0::/\n",
		"sys/fs/cgroup/memory.max": "1000000000\n",
	})

	t.Setenv("GOMEMLIMIT", "")
	limit, soft, err := Apply(root)
	if err != nil || limit != 1e9 || soft != 9e8 {
		t.Fatalf("Apply = %d, %d, %v; want 1e9, 9e8", limit, soft, err)
	}
	if got := debug.SetMemoryLimit(-1); got != 9e8 {
		t.Errorf("runtime soft limit %d, want 9e8", got)
	}

	// An operator's GOMEMLIMIT wins.
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "500MiB")
	if _, soft, err := Apply(root); err != nil || soft != 0 {
		t.Fatalf("Apply with GOMEMLIMIT set = soft %d, %v; want 0", soft, err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("runtime soft limit changed to %d despite GOMEMLIMIT", got)
	}

	// No limit: nothing set.
	if limit, soft, err := Apply(fakeRoot(t, nil)); err != nil || limit != 0 || soft != 0 {
		t.Errorf("Apply without a cgroup = %d, %d, %v", limit, soft, err)
	}
}

func TestDefaultGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })

	t.Setenv("GOGC", "80")
	if DefaultGCPercent(37) {
		t.Error("set the target although GOGC is set")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("target %d with GOGC set, want it left at 100", got)
	}

	t.Setenv("GOGC", "")
	if !DefaultGCPercent(37) {
		t.Error("did not set the target with GOGC unset")
	}
	if got := debug.SetGCPercent(100); got != 37 {
		t.Errorf("target %d, want 37", got)
	}
}
