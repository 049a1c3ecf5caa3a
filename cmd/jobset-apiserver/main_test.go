package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
	"github.com/nativejobset/jobset/pkg/etcdsnapshot"
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
		{[]string{"snapshot", "save", dir + "/a.db", "--into-dir=" + dir}, "give no FILE argument"},
		{[]string{"snapshot", "save", dir + "/a.db", "--keep=3"}, "--keep goes with --into-dir"},
		{[]string{"snapshot", "save", "--into-dir=" + dir, "--keep=-1"}, "--keep=-1"},
		{[]string{"snapshot", "save", "--into-dir=" + dir + "/nowhere"}, "is not a directory"},
		{[]string{"snapshot", "save", "-", "--from-pod=jobset-apiserver-0"}, "want NAMESPACE/NAME"},
		{[]string{"snapshot", "save", "-", "--from-pod=a/b/c"}, "want NAMESPACE/NAME"},
		{[]string{"snapshot", "save", "-", "--from-pod=a/b", "--etcd-servers=http://127.0.0.1:1"}, "give one"},
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

// TestSnapshotSaveIntoDir takes a scheduled backup's snapshot from a running
// embedded etcd: it is named after the time, checked and described, and
// only the newest --keep snapshots are left.
func TestSnapshotSaveIntoDir(t *testing.T) {
	base, err := os.MkdirTemp("", "snap") // short enough for the etcd socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	etcdDir, backups := filepath.Join(base, "etcd"), filepath.Join(base, "backups")
	srv, err := embeddedetcd.Start(embeddedetcd.Config{Dir: etcdDir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := os.Mkdir(backups, 0o700); err != nil {
		t.Fatal(err)
	}
	const older = "jobsets-20200101T000000Z.db"
	if err := os.WriteFile(filepath.Join(backups, older), []byte("an old backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runSnapshot([]string{"save", "--into-dir=" + backups, "--keep=1", "--embedded-etcd-dir=" + etcdDir}, nil, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	names, err := etcdsnapshot.Backups(backups)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] == older {
		t.Fatalf("backups left: %v, want one new snapshot in place of %s", names, older)
	}
	if err := etcdsnapshot.Verify(filepath.Join(backups, names[0])); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"written to " + filepath.Join(backups, names[0]), "checksum ok, revision", "removed the old snapshot " + older} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not say %q:\n%s", want, out.String())
		}
	}
	if entries, _ := os.ReadDir(backups); len(entries) != 1 || !reflect.DeepEqual(entries[0].Name(), names[0]) {
		t.Errorf("the directory holds %v, want the snapshot alone", entries)
	}
}
