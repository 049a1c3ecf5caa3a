package etcdsnapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCopyFileKeepsOnlyAWholeCheckedSnapshot(t *testing.T) {
	good := snapshotBytes("data")
	corrupt := bytes.Clone(good)
	corrupt[10] ^= 1
	broken := io.MultiReader(bytes.NewReader(good[:600]), iotestErrReader{errors.New("stream reset")})
	for name, tc := range map[string]struct {
		r    io.Reader
		want string
	}{
		"whole":     {bytes.NewReader(good), ""},
		"corrupt":   {bytes.NewReader(corrupt), "does not match"},
		"truncated": {bytes.NewReader(good[:len(good)-5]), "not an etcd snapshot"},
		"broken":    {broken, "after 600 bytes: stream reset"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "backup.db")
			saved, err := CopyFile(tc.r, path)
			entries, _ := os.ReadDir(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				got, _ := os.ReadFile(path)
				if !bytes.Equal(got, good) || saved.Bytes != int64(len(good)) {
					t.Fatalf("wrote %d bytes (reported %d), want the %d streamed", len(got), saved.Bytes, len(good))
				}
				if len(entries) != 1 {
					t.Fatalf("%d files in the directory, want the snapshot alone", len(entries))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CopyFile = %v, want an error saying %q", err, tc.want)
			}
			if len(entries) != 0 {
				t.Fatalf("a failed copy left %v behind", entries)
			}
		})
	}
}

func TestCopyFileRefusesToOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyFile(bytes.NewReader(snapshotBytes("new")), path); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("CopyFile over an existing file = %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("the existing file was changed to %q", got)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestBackupNamesSortByTime(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 5, 7, 0, time.FixedZone("CET", 3600))
	if got, want := BackupName(t0), "jobsets-20261203T080507Z.db"; got != want {
		t.Fatalf("BackupName = %q, want %q (UTC)", got, want)
	}
	dir := t.TempDir()
	var want []string
	for _, d := range []time.Duration{0, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour} {
		want = append(want, BackupName(t0.Add(d)))
	}
	// Written newest first, plus files that are not scheduled backups.
	for i := len(want) - 1; i >= 0; i-- {
		if err := os.WriteFile(filepath.Join(dir, want[i]), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, other := range []string{"jobsets-latest.db", "notes.txt", "." + want[0] + ".part-123", "jobsets-20261203T080507Z.db.old"} {
		if err := os.WriteFile(filepath.Join(dir, other), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, BackupName(t0.Add(time.Minute))), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := Backups(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Backups = %v, want %v", got, want)
	}

	removed, err := Prune(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, want[:2]) {
		t.Fatalf("Prune removed %v, want the two oldest %v", removed, want[:2])
	}
	if got, _ := Backups(dir); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("after Prune: %v, want %v", got, want[2:])
	}
	for _, other := range []string{"jobsets-latest.db", "notes.txt"} {
		if _, err := os.Stat(filepath.Join(dir, other)); err != nil {
			t.Errorf("Prune touched %s: %v", other, err)
		}
	}
	if removed, err := Prune(dir, 5); err != nil || removed != nil {
		t.Fatalf("Prune with room to spare = %v, %v; want nothing removed", removed, err)
	}
	if _, err := Prune(dir, 0); err == nil {
		t.Fatal("Prune(keep=0) removed the newest backup instead of refusing")
	}
}
