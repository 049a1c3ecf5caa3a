// Package embeddedetcd runs a single-member etcd inside the API server
// process, bound to loopback, for installations without an etcd cluster.
package embeddedetcd

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// Config says where the embedded etcd keeps its data and listens.
type Config struct {
	// Dir holds the data; it survives restarts of the server.
	Dir string
	// ClientPort, when positive, serves clients on that loopback TCP port
	// instead of the unix socket in Dir (for etcdctl while debugging).
	ClientPort int
	// StartTimeout bounds how long the member may take to become ready.
	StartTimeout time.Duration
	// MaxRequestBytes is the largest write etcd accepts (default
	// DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// QuotaBackendBytes is the database size at which etcd raises its
	// NOSPACE alarm (default DefaultQuotaBackendBytes).
	QuotaBackendBytes int64
	// MaintenanceInterval is how often the database size is checked for
	// defragmentation and the NOSPACE alarm (default a minute).
	MaintenanceInterval time.Duration
	// MinDefragBytes is the smallest database worth defragmenting when
	// mostly free (default 64 MiB); a raised NOSPACE alarm ignores it.
	MinDefragBytes int64
	// MinDefragInterval is the least time between two defragmentations
	// of a mostly free database (default DefaultMinDefragInterval). A
	// defragmentation stalls every read and write of the member while it
	// runs, and anyone who may create and delete JobSets can free space:
	// the bound keeps that from stalling the API at will. Recovery from a
	// raised NOSPACE alarm is not bounded: writes are refused until then.
	MinDefragInterval time.Duration
	// OnAlarmChange, when set, is called when the NOSPACE alarm is seen
	// raised and when it is cleared, with a message for an operator, for a
	// caller that reports it elsewhere (jobset-apiserver records Events);
	// the maintainer logs and exports the metric itself. It must not block.
	OnAlarmChange func(raised bool, message string)
	// UnsafeNoFsync skips fsync on every write, as etcd's
	// --unsafe-no-fsync: a crash of the machine (not of the process) can
	// lose acknowledged writes. For throwaway test clusters only.
	UnsafeNoFsync bool
}

// Defaults of Config, set deliberately rather than inherited.
const (
	// DefaultMaxRequestBytes is etcd's own default: it leaves room under
	// the 2 MiB the API server's etcd client sends at most.
	DefaultMaxRequestBytes = 3 * 512 * 1024
	// DefaultQuotaBackendBytes is etcd's own default quota, 2 GiB.
	DefaultQuotaBackendBytes = 2 * 1024 * 1024 * 1024
	// DefaultMinDefragInterval bounds how often a mostly free database
	// is defragmented.
	DefaultMinDefragInterval = 30 * time.Minute
	// snapshotCatchUpEntries is how many applied raft entries etcd keeps
	// in memory after each in-memory snapshot. They serve only followers
	// that fell behind, and a one-member cluster has none; etcd's default
	// of 5,000 keeps the last 5,000 writes (each a whole JobSet) on the
	// heap, about 40 MiB. The entries stay in the write-ahead log on disk.
	snapshotCatchUpEntries = 100
)

// The embedded member's identity. A snapshot restored for the embedded etcd
// gets the same (pkg/etcdsnapshot), so that the server starts on it as on
// its own data.
const (
	MemberName   = "jobset-apiserver"
	PeerURL      = "http://127.0.0.1:0"
	ClusterToken = "etcd-cluster"
)

// ClientURL is where a client on this machine reaches an embedded etcd
// whose data directory is dir: its unix socket there, or the loopback port
// when port is positive.
func ClientURL(dir string, port int) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	u, err := clientURL(abs, port)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// Server is a running embedded etcd.
type Server struct {
	etcd        *embed.Etcd
	maintenance *maintainer
	// ClientURL is where the API server's storage connects.
	ClientURL string
}

// Start launches the member and waits until it serves clients.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("embedded etcd needs a data directory")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating embedded etcd directory: %w", err)
	}
	// The sockets inside are only as private as the directory.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restricting the embedded etcd directory to its owner: %w", err)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if cfg.MaintenanceInterval == 0 {
		cfg.MaintenanceInterval = time.Minute
	}
	if cfg.MinDefragBytes == 0 {
		cfg.MinDefragBytes = 64 * 1024 * 1024
	}
	if cfg.MinDefragInterval == 0 {
		cfg.MinDefragInterval = DefaultMinDefragInterval
	}

	ec := embed.NewConfig()
	ec.Name = MemberName
	ec.InitialClusterToken = ClusterToken
	ec.Dir = dir
	ec.LogLevel = "warn"
	ec.MaxRequestBytes = uint(cfg.MaxRequestBytes)
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.SnapshotCatchUpEntries = snapshotCatchUpEntries
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	// Peers are never dialled in a one-member cluster, but etcd always
	// listens for them, and whoever reaches that listener can append to
	// the raft log. A socket in the private directory keeps it off the
	// network (etcd takes a peer socket's path from the URL's host). The
	// advertised URL is only a label, kept as it always was.
	peerListen := url.URL{Scheme: "unix", Host: filepath.Join(dir, peerSocketName)}
	peer, err := url.Parse(PeerURL)
	if err != nil {
		return nil, err
	}
	client, err := clientURL(dir, cfg.ClientPort)
	if err != nil {
		return nil, err
	}
	if cfg.ClientPort > 0 {
		klog.Warningf("UNSAFE: the embedded etcd serves plaintext, unauthenticated clients on 127.0.0.1:%d (--embedded-etcd-client-port): "+
			"any process on this machine, or in this pod's network namespace, can read and change every JobSet there, bypassing authentication, "+
			"authorization, admission and validation. Use it only while debugging; the default (0) serves only the private unix socket.", cfg.ClientPort)
	}
	ec.ListenPeerUrls = []url.URL{peerListen}
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	keepPrivate(ec)

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(cfg.StartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s was not ready within %s", dir, cfg.StartTimeout)
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, fmt.Errorf("embedded etcd has no client listener")
	}
	s := &Server{etcd: e, ClientURL: client.String()}
	if client.Scheme == "http" {
		s.ClientURL = "http://" + e.Clients[0].Addr().String()
	}
	s.maintenance = newMaintainer(e, cfg)
	klog.InfoS("Embedded etcd is serving", "dir", dir, "url", s.ClientURL)
	return s, nil
}

// Stop shuts the member down and releases its data directory.
func (s *Server) Stop() {
	if s != nil && s.etcd != nil {
		s.maintenance.shutdown()
		s.etcd.Close()
		s.etcd = nil
		klog.InfoS("Embedded etcd stopped")
	}
}

// NospaceRaised reports whether etcd refuses writes for lack of space. It
// is not a readiness check: reads and deletes, which free the space, still
// work, and with one replica a failing /readyz would stop kube-apiserver
// from routing them here.
func (s *Server) NospaceRaised() bool {
	return s.maintenance.alarm.Load() || s.maintenance.nospaceRaised()
}

// NoticeNospace asks for a maintenance pass soon, after a write was
// refused for lack of space: it records the alarm and reports it.
func (s *Server) NoticeNospace() { s.maintenance.kick() }

// CheckSpace runs the maintenance at once (sizes, defragmentation, alarm).
func (s *Server) CheckSpace() { s.maintenance.check() }
