package etcdsnapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
)

// startEtcd runs an embedded etcd in dir, stopped when the test ends.
func startEtcd(t *testing.T, dir string) *embeddedetcd.Server {
	t.Helper()
	srv, err := embeddedetcd.Start(embeddedetcd.Config{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func client(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(context.Background(), key, value)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// shortTempDir is a temporary directory with a path short enough for the
// etcd socket in it.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "snap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestSaveAndRestoreTheEmbeddedEtcd(t *testing.T) {
	base := shortTempDir(t)
	srv := startEtcd(t, filepath.Join(base, "etcd"))
	cli := client(t, srv.ClientURL)
	for i := range 20 {
		put(t, cli, fmt.Sprintf("/registry/jobset.x-k8s.io/jobsets/ns/js-%d", i), fmt.Sprintf("v%d", i))
	}
	rev := put(t, cli, "/registry/jobset.x-k8s.io/jobsets/ns/last", "before")

	file := filepath.Join(base, "backup.db")
	saved, err := SaveFile(context.Background(), Source{Endpoint: srv.ClientURL}, file)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != saved.Bytes {
		t.Fatalf("snapshot file: %v (size %v), Save reported %d bytes", err, fi, saved.Bytes)
	}
	if saved.EtcdVersion == "" {
		t.Error("Save reported no etcd version")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(base, ".backup.db.part-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	st, err := Inspect(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != rev || st.TotalKey != 21 {
		t.Errorf("snapshot status: revision %d, %d keys; want revision %d, 21 keys", st.Revision, st.TotalKey, rev)
	}
	// Written after the snapshot: gone after the restore.
	put(t, cli, "/registry/jobset.x-k8s.io/jobsets/ns/last", "after")
	put(t, cli, "/registry/jobset.x-k8s.io/jobsets/ns/later", "x")

	restored := filepath.Join(base, "restored")
	if _, err := Restore(RestoreOptions{Snapshot: file, DataDir: restored, Member: EmbeddedMember(), RevisionBump: DefaultRevisionBump}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(restored); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("restored directory: %v, mode %v; want 0700", err, fi)
	}
	srv2 := startEtcd(t, restored)
	cli2 := client(t, srv2.ClientURL)
	resp, err := cli2.Get(context.Background(), "/registry/jobset.x-k8s.io/jobsets/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if len(got) != 21 || got["/registry/jobset.x-k8s.io/jobsets/ns/last"] != "before" || got["/registry/jobset.x-k8s.io/jobsets/ns/js-7"] != "v7" {
		t.Errorf("restored keys: %v; want the 21 keys of the snapshot with their values", got)
	}
	if _, ok := got["/registry/jobset.x-k8s.io/jobsets/ns/later"]; ok {
		t.Error("a key written after the snapshot is in the restored store")
	}
	// The revision moved on by the bump, and the old ones are compacted: a
	// watch from a revision seen before the restore is refused.
	if resp.Header.Revision < rev+DefaultRevisionBump {
		t.Errorf("revision after restore %d, want at least %d", resp.Header.Revision, rev+DefaultRevisionBump)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wresp := <-cli2.Watch(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	if wresp.CompactRevision == 0 {
		t.Errorf("a watch from revision %d after the restore was not told it is compacted: %+v", rev+1, wresp)
	}
}

func TestSaveFileRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(file, []byte("earlier backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := SaveFile(context.Background(), Source{Endpoint: "unix://" + filepath.Join(dir, "none.sock")}, file)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("SaveFile over an existing file: %v, want an error saying it already exists", err)
	}
	if data, _ := os.ReadFile(file); string(data) != "earlier backup" {
		t.Errorf("the existing file was changed to %q", data)
	}
}

func TestSaveFileLeavesNothingWhenEtcdIsNotThere(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := SaveFile(ctx, Source{Endpoint: "unix://" + filepath.Join(dir, "none.sock")}, filepath.Join(dir, "backup.db"))
	if err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("SaveFile without etcd: %v, want an error naming the endpoint", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// snapshotBytes builds a well-formed snapshot file's bytes: a body padded
// to 512-byte pages and its sha256.
func snapshotBytes(body string) []byte {
	b := make([]byte, 1024)
	copy(b, body)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

func TestChecksum(t *testing.T) {
	good := snapshotBytes("data")
	for _, chunk := range []int{1, 7, 32, 33, 4096} {
		c := newChecksum()
		for i := 0; i < len(good); i += chunk {
			c.Write(good[i:min(i+chunk, len(good))])
		}
		if err := c.verify(int64(len(good))); err != nil {
			t.Errorf("written in chunks of %d: %v", chunk, err)
		}
	}
	corrupt := bytes.Clone(good)
	corrupt[100] ^= 1
	truncated := good[:len(good)-1]
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"corrupt":   {corrupt, "does not match"},
		"truncated": {truncated, "not an etcd snapshot"},
		"empty":     {nil, "not an etcd snapshot"},
	} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Verify(path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: Verify = %v, want an error naming the file and saying %q", name, err, tc.want)
		}
	}
}

// savedSnapshot takes a real snapshot of a fresh embedded etcd with one key.
func savedSnapshot(t *testing.T) (string, *embeddedetcd.Server) {
	t.Helper()
	base := shortTempDir(t)
	srv := startEtcd(t, filepath.Join(base, "etcd"))
	put(t, client(t, srv.ClientURL), "/registry/jobset.x-k8s.io/jobsets/ns/a", "a")
	file := filepath.Join(base, "backup.db")
	if _, err := SaveFile(context.Background(), Source{Endpoint: srv.ClientURL}, file); err != nil {
		t.Fatal(err)
	}
	return file, srv
}

func TestRestoreRefusals(t *testing.T) {
	file, running := savedSnapshot(t)
	member := EmbeddedMember()

	t.Run("non-empty directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "etcd")
		if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(RestoreOptions{Snapshot: file, DataDir: dir, Member: member})
		if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "--replace-existing") {
			t.Fatalf("Restore into a non-empty directory: %v, want a refusal that names --replace-existing", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "member" {
			t.Errorf("the directory was changed: %v", entries)
		}
		if siblings, _ := os.ReadDir(filepath.Dir(dir)); len(siblings) != 1 {
			t.Errorf("left beside it: %v", siblings)
		}
	})
	t.Run("in use by a running etcd", func(t *testing.T) {
		dir := filepath.Join(filepath.Dir(file), "etcd")
		_, err := Restore(RestoreOptions{Snapshot: file, DataDir: dir, Member: member, ReplaceExisting: true})
		if err == nil || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("Restore over a running etcd's directory: %v, want a refusal saying it is in use", err)
		}
		put(t, client(t, running.ClientURL), "/still/serving", "yes")
	})
	t.Run("corrupt snapshot", func(t *testing.T) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0xff
		bad := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(bad, data, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "etcd")
		_, err = Restore(RestoreOptions{Snapshot: bad, DataDir: dir, Member: member})
		if err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("Restore of a corrupt snapshot: %v, want a checksum error", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the data directory exists after a failed restore: %v", err)
		}
	})
	t.Run("no data directory", func(t *testing.T) {
		if _, err := Restore(RestoreOptions{Snapshot: file, Member: member}); err == nil {
			t.Fatal("Restore without a data directory succeeded")
		}
	})
}

func TestRestoreReplacesExistingDirectory(t *testing.T) {
	file, _ := savedSnapshot(t)
	base := shortTempDir(t)
	dir := filepath.Join(base, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old"), []byte("old data"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	r, err := Restore(RestoreOptions{Snapshot: file, DataDir: dir, Member: EmbeddedMember(), ReplaceExisting: true, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + ".replaced-20261202T180000Z"; r.Replaced != want {
		t.Errorf("replaced directory %q, want %q", r.Replaced, want)
	}
	if data, err := os.ReadFile(filepath.Join(r.Replaced, "old")); err != nil || string(data) != "old data" {
		t.Errorf("the previous data were not kept: %q, %v", data, err)
	}
	srv := startEtcd(t, dir)
	resp, err := client(t, srv.ClientURL).Get(context.Background(), "/registry/jobset.x-k8s.io/jobsets/ns/a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("the restored store: %v, %v; want the key of the snapshot", resp, err)
	}
}

func TestRestoreIntoAnEmptyDirectory(t *testing.T) {
	file, _ := savedSnapshot(t)
	dir := filepath.Join(shortTempDir(t), "etcd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(RestoreOptions{Snapshot: file, DataDir: dir, Member: EmbeddedMember()})
	if err != nil || r.Replaced != "" {
		t.Fatalf("Restore into an empty directory: %+v, %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err != nil {
		t.Errorf("no database restored: %v", err)
	}
}

func TestSpool(t *testing.T) {
	dir := t.TempDir()
	good := snapshotBytes("spooled")
	path, err := Spool(bytes.NewReader(good), dir)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, good) {
		t.Error("the spooled file differs from its input")
	}
	os.Remove(path)
	if _, err := Spool(bytes.NewReader(good[:700]), dir); err == nil || !strings.Contains(err.Error(), "not an etcd snapshot") {
		t.Errorf("spooling a truncated snapshot: %v, want a refusal", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}
