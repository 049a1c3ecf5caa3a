package etcdsnapshot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
)

// DefaultRevisionBump is how far the store's revision is moved past the
// snapshot's by default, as etcd's documentation advises for a restore
// behind Kubernetes: every resourceVersion issued after the restore is
// greater than any issued before it, and the old ones are marked compacted,
// so a client watching from a resourceVersion it saw before the restore gets
// 410 Gone and relists instead of silently missing the writes lost since
// the snapshot. A billion is more writes than a store sees between two
// backups.
const DefaultRevisionBump = 1_000_000_000

// Member is the identity of the etcd member a restored data directory
// belongs to.
type Member struct {
	Name string
	// PeerURL is the member's advertised peer URL.
	PeerURL string
	// InitialCluster lists every member as name=peerURL,...; empty means
	// this member alone.
	InitialCluster string
	ClusterToken   string
}

// EmbeddedMember is the member jobset-apiserver's embedded etcd is.
func EmbeddedMember() Member {
	return Member{Name: embeddedetcd.MemberName, PeerURL: embeddedetcd.PeerURL, ClusterToken: embeddedetcd.ClusterToken}
}

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	// Snapshot is the file written by Save or SaveFile (or by etcdctl).
	Snapshot string
	// DataDir is the etcd data directory to create: for the embedded etcd
	// the server's --embedded-etcd-dir.
	DataDir string
	Member  Member
	// RevisionBump: see DefaultRevisionBump; 0 keeps the snapshot's revision.
	RevisionBump uint64
	// ReplaceExisting allows a non-empty DataDir: it is renamed to
	// <DataDir>.replaced-<UTC time> (never deleted) once the restore is
	// complete.
	ReplaceExisting bool
	// Now names the replaced directory (time.Now when nil).
	Now func() time.Time
}

// Restored says what Restore did.
type Restored struct {
	// Replaced is where the previous data directory was moved, if any.
	Replaced string
}

// Restore creates DataDir from a snapshot. It refuses a DataDir that holds
// anything (unless ReplaceExisting) and one that a running etcd has open.
// The data are restored into a new directory beside DataDir and renamed
// into place only when complete, so a failed restore leaves DataDir as it
// was.
func Restore(o RestoreOptions) (Restored, error) {
	if o.DataDir == "" {
		return Restored{}, errors.New("no data directory to restore into")
	}
	if o.Member.Name == "" || o.Member.PeerURL == "" {
		return Restored{}, errors.New("the restored member needs a name and a peer URL")
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return Restored{}, err
	}
	if err := Verify(o.Snapshot); err != nil {
		return Restored{}, err
	}
	existing, err := contents(dataDir)
	if err != nil {
		return Restored{}, err
	}
	if len(existing) > 0 {
		if !o.ReplaceExisting {
			return Restored{}, fmt.Errorf("data directory %s is not empty (it holds %s): restore only into a new or empty directory, or pass --replace-existing to keep it aside as %s.replaced-<time>",
				dataDir, existing[0], dataDir)
		}
		if err := notInUse(dataDir); err != nil {
			return Restored{}, err
		}
	}
	parent := filepath.Dir(dataDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return Restored{}, fmt.Errorf("creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dataDir)+".restoring-")
	if err != nil {
		return Restored{}, fmt.Errorf("creating a directory beside %s: %w", dataDir, err)
	}
	defer os.RemoveAll(tmp)
	initial := o.Member.InitialCluster
	if initial == "" {
		initial = o.Member.Name + "=" + o.Member.PeerURL
	}
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        o.Snapshot,
		Name:                o.Member.Name,
		OutputDataDir:       tmp,
		PeerURLs:            []string{o.Member.PeerURL},
		InitialCluster:      initial,
		InitialClusterToken: o.Member.ClusterToken,
		RevisionBump:        o.RevisionBump,
		MarkCompacted:       o.RevisionBump > 0,
	})
	if err != nil {
		return Restored{}, fmt.Errorf("restoring %s: %w", o.Snapshot, err)
	}

	var r Restored
	switch {
	case len(existing) > 0:
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		r.Replaced = dataDir + ".replaced-" + now().UTC().Format("20060102T150405Z")
		if err := os.Rename(dataDir, r.Replaced); err != nil {
			return Restored{}, fmt.Errorf("moving the current data directory aside: %w", err)
		}
	case existing != nil:
		// Present but empty.
		if err := os.Remove(dataDir); err != nil {
			return Restored{}, fmt.Errorf("replacing the empty %s: %w", dataDir, err)
		}
	}
	if err := os.Rename(tmp, dataDir); err != nil {
		return r, fmt.Errorf("moving the restored data into %s: %w", dataDir, err)
	}
	return r, syncDir(parent)
}

// contents lists up to one entry of dir: nil when dir does not exist, empty
// when it exists and is empty.
func contents(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return names, nil
}

// notInUse fails when an etcd (on its own or inside jobset-apiserver) has
// the data directory open: it holds an exclusive lock on its database file.
func notInUse(dataDir string) error {
	db := filepath.Join(dataDir, "member", "snap", "db")
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking whether %s is in use: %w", db, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("data directory %s is in use by a running etcd (jobset-apiserver?): stop it before restoring", dataDir)
		}
		return fmt.Errorf("locking %s: %w", db, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// Spool copies a snapshot from r (say, standard input) into a new file in
// dir and checks its checksum, for Restore, which needs a file. The caller
// removes the file.
func Spool(r io.Reader, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".snapshot-*.db")
	if err != nil {
		return "", fmt.Errorf("creating a file for the snapshot in %s: %w", dir, err)
	}
	check := newChecksum()
	n, err := io.Copy(io.MultiWriter(f, check), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = check.verify(n)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("the snapshot received: %w", err)
	}
	return f.Name(), nil
}

// Status is what a snapshot file holds.
type Status = snapshot.Status

// Inspect checks a snapshot file (its checksum and its database's
// integrity) and says what it holds: its revision, key count and size.
func Inspect(path string) (Status, error) {
	if err := Verify(path); err != nil {
		return Status{}, err
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return Status{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}
