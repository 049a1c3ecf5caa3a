// Package etcdsnapshot takes a consistent snapshot of the JobSet store from
// a running etcd (the embedded one or an external member) and restores one
// into a new data directory, so that an operator has the backup that the
// cluster's own etcd backups no longer give for JobSets.
package etcdsnapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// checksumSize is the length of the sha256 digest that etcd appends to every
// snapshot it streams.
const checksumSize = sha256.Size

// Source is the etcd member to take the snapshot from. A snapshot is one
// member's point-in-time state, so there is exactly one endpoint.
type Source struct {
	// Endpoint is a client URL: unix:///path/etcd.sock for the embedded
	// etcd, http(s)://host:port for an external member.
	Endpoint string
	// TLS is the client's TLS configuration for an https endpoint.
	TLS *tls.Config
}

// Saved describes a snapshot that was written.
type Saved struct {
	Bytes int64
	// EtcdVersion is the storage version of the etcd that made it.
	EtcdVersion string
}

// Save streams a snapshot from src to w and checks the checksum etcd sent
// with it. The bytes are written before the check can be made, so a caller
// that writes to a file must not keep it when Save fails.
func Save(ctx context.Context, src Source, w io.Writer) (Saved, error) {
	if src.Endpoint == "" {
		return Saved{}, errors.New("no etcd endpoint to take the snapshot from")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{src.Endpoint},
		TLS:         src.TLS,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		// Fail at once rather than wait for a member that is not there.
		DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.WaitForReady(false))},
	})
	if err != nil {
		return Saved{}, fmt.Errorf("connecting to etcd at %s: %w", src.Endpoint, err)
	}
	defer cli.Close()
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return Saved{}, fmt.Errorf("requesting a snapshot from etcd at %s: %w", src.Endpoint, err)
	}
	defer resp.Snapshot.Close()
	check := newChecksum()
	n, err := io.Copy(io.MultiWriter(w, check), resp.Snapshot)
	if err != nil {
		return Saved{Bytes: n}, fmt.Errorf("receiving the snapshot from etcd at %s after %d bytes: %w", src.Endpoint, n, err)
	}
	if err := check.verify(n); err != nil {
		return Saved{Bytes: n}, fmt.Errorf("the snapshot received from etcd at %s: %w", src.Endpoint, err)
	}
	return Saved{Bytes: n, EtcdVersion: resp.Version}, nil
}

// SaveFile writes a snapshot from src to path, which must not exist: it is
// written to a temporary file beside it, synced, checked, and only then
// given its name, so that path never holds a partial or corrupt snapshot and
// an earlier backup is never overwritten.
func SaveFile(ctx context.Context, src Source, path string) (Saved, error) {
	return writeNew(path, func(w io.Writer) (Saved, error) { return Save(ctx, src, w) })
}

// CopyFile writes the snapshot that r streams (the output of `snapshot save
// -`, say from the server's pod) to path with SaveFile's guarantees, and
// checks the checksum at its end.
func CopyFile(r io.Reader, path string) (Saved, error) {
	return writeNew(path, func(w io.Writer) (Saved, error) {
		check := newChecksum()
		n, err := io.Copy(io.MultiWriter(w, check), r)
		if err != nil {
			return Saved{Bytes: n}, fmt.Errorf("receiving the snapshot after %d bytes: %w", n, err)
		}
		if err := check.verify(n); err != nil {
			return Saved{Bytes: n}, fmt.Errorf("the snapshot received: %w", err)
		}
		return Saved{Bytes: n}, nil
	})
}

// writeNew gives path the contents that fill writes, only once fill has
// succeeded and the data is synced; path must not exist.
func writeNew(path string, fill func(io.Writer) (Saved, error)) (Saved, error) {
	if _, err := os.Lstat(path); err == nil {
		return Saved{}, fmt.Errorf("%s already exists: refusing to overwrite it; choose a new file name", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Saved{}, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return Saved{}, fmt.Errorf("creating a temporary file beside %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	saved, err := fill(tmp)
	if err != nil {
		return saved, err
	}
	if err := tmp.Sync(); err != nil {
		return saved, fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return saved, fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	// A hard link, unlike a rename, fails when path appeared meanwhile.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return saved, fmt.Errorf("%s was created while the snapshot was taken: refusing to overwrite it", path)
		}
		return saved, fmt.Errorf("naming the snapshot %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return saved, err
	}
	return saved, nil
}

// Verify checks the checksum at the end of a snapshot file.
func Verify(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	check := newChecksum()
	n, err := io.Copy(check, f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := check.verify(n); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checksum hashes everything written to it but the last checksumSize bytes,
// which it keeps to compare with the hash.
type checksum struct {
	h    hash.Hash
	tail []byte
}

func newChecksum() *checksum { return &checksum{h: sha256.New()} }

func (c *checksum) Write(p []byte) (int, error) {
	c.tail = append(c.tail, p...)
	if extra := len(c.tail) - checksumSize; extra > 0 {
		c.h.Write(c.tail[:extra])
		c.tail = append(c.tail[:0], c.tail[extra:]...)
	}
	return len(p), nil
}

// verify says whether the n bytes written end with the sha256 of the rest.
func (c *checksum) verify(n int64) error {
	// etcd pads the database to 512-byte pages and appends the digest.
	if n%512 != checksumSize {
		return fmt.Errorf("not an etcd snapshot with a checksum (%d bytes; a truncated or partial file?)", n)
	}
	if !bytes.Equal(c.h.Sum(nil), c.tail) {
		return errors.New("the sha256 checksum does not match the contents: the snapshot is corrupt")
	}
	return nil
}

// syncDir makes a new name in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
