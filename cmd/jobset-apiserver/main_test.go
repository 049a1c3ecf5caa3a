package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/pkg/version"
)

// TestVersionFlag also checks that --version does not clash with a flag of
// k8s.io/apiserver's options (pflag panics on a redefinition).
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String("jobset-apiserver")+"\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

// TestSnapshotCommandErrors checks that mistakes on the snapshot command
// line end in errors that say what is wrong, before anything is touched.
func TestSnapshotCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot"}, "needs a command"},
		{[]string{"snapshot", "copy"}, `unknown snapshot command "copy"`},
		{[]string{"snapshot", "save"}, "needs exactly one argument"},
		{[]string{"snapshot", "save", dir + "/a.db", "--embedded-etcd-dir=" + dir}, "no embedded etcd socket at " + dir + "/etcd.sock"},
		{[]string{"snapshot", "save", dir + "/a.db", "--etcd-servers=http://127.0.0.1:1,http://127.0.0.1:2"}, "exactly one member"},
		{[]string{"snapshot", "restore", dir + "/a.db"}, "--data-dir is required"},
		{[]string{"snapshot", "restore", dir + "/missing.db", "--data-dir=" + dir + "/etcd"}, "missing.db"},
		{[]string{"snapshot", "status", dir + "/missing.db"}, "missing.db"},
	} {
		err := run(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left in %s: %v", dir, entries)
	}
}
