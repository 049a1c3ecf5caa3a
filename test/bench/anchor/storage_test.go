package anchor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nativejobset/jobset/test/localcluster"
)

// The etcd stores under one side's objects. kube-apiserver and
// jobset-apiserver compact them every --etcd-compaction-interval (5 min by
// default), to the revision they saw one interval earlier, so a store at
// rest drops the burst's old versions within two intervals. The benchmark
// does that compaction itself, at the same moment on both sides, instead of
// waiting up to ten minutes for it. What follows it differs by design:
// jobset-apiserver checks its embedded etcd once a minute and defragments a
// file that compaction left mostly free (pkg/embeddedetcd), which unmaps
// the old database pages; the cluster's etcd is not defragmented by
// anyone (an operator's job), and its RSS is not jobset-apiserver's.

// store is one etcd and what it holds.
type store struct {
	name   string
	client *clientv3.Client
}

// storesOf are the cluster's etcd and, on ours' side, the embedded etcd
// of jobset-apiserver (its private socket, which only its user can reach).
func storesOf(b *testing.B, c *localcluster.Cluster, side string) []store {
	port, err := c.Setting("ETCD_PORT")
	if err != nil {
		b.Fatal(err)
	}
	tlsConfig, err := c.EtcdClientTLS()
	if err != nil {
		b.Fatal(err)
	}
	stores := []store{{name: "cluster etcd", client: etcdClient(b, "https://127.0.0.1:"+port, tlsConfig)}}
	if side == "ours" {
		socket := filepath.Join(c.LocalDir, "data", "jobset-etcd", "etcd.sock")
		stores = append(stores, store{name: "embedded etcd", client: etcdClient(b, "unix://"+socket, nil)})
	}
	return stores
}

func etcdClient(b *testing.B, endpoint string, tlsConfig *tls.Config) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConfig,
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatalf("connecting to etcd at %s: %v", endpoint, err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// compact compacts the store to its current revision and waits until the
// backend has dropped the old versions.
func (s store) compact(ctx context.Context, b *testing.B, side string) {
	before := s.status(ctx, b)
	if _, err := s.client.Compact(ctx, before.Header.Revision, clientv3.WithCompactPhysical()); err != nil &&
		!errors.Is(err, rpctypes.ErrCompacted) {
		b.Fatalf("compacting the %s: %v", s.name, err)
	}
	after := s.status(ctx, b)
	b.Logf("%s %s: compacted to revision %d: database %s, in use %s -> %s", side, s.name, before.Header.Revision,
		mib(before.DbSize), mib(before.DbSizeInUse), mib(after.DbSizeInUse))
}

// logSize logs the database's size now (after a defragmentation, smaller).
func (s store) logSize(ctx context.Context, b *testing.B, side string) {
	st := s.status(ctx, b)
	b.Logf("%s %s: database %s, in use %s", side, s.name, mib(st.DbSize), mib(st.DbSizeInUse))
}

func (s store) status(ctx context.Context, b *testing.B) *clientv3.StatusResponse {
	st, err := s.client.Status(ctx, s.client.Endpoints()[0])
	if err != nil {
		b.Fatalf("status of the %s: %v", s.name, err)
	}
	return st
}

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }
