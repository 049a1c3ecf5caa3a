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
	// ClientPort is the loopback port for clients; 0 picks a free one.
	ClientPort int
	// StartTimeout bounds how long the member may take to become ready.
	StartTimeout time.Duration
}

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
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
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = time.Minute
	}

	ec := embed.NewConfig()
	ec.Name = "jobset-apiserver"
	ec.Dir = dir
	ec.LogLevel = "warn"
	// Peers are never dialled in a one-member cluster; port 0 keeps the
	// listener off any fixed port. The advertised URL is only a label.
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cfg.ClientPort)}
	ec.ListenPeerUrls = []url.URL{peer}
	ec.AdvertisePeerUrls = []url.URL{peer}
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)

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
	s := &Server{etcd: e, ClientURL: "http://" + e.Clients[0].Addr().String()}
	klog.InfoS("Embedded etcd is serving", "dir", dir, "url", s.ClientURL)
	return s, nil
}

// Stop shuts the member down and releases its data directory.
func (s *Server) Stop() {
	if s != nil && s.etcd != nil {
		s.etcd.Close()
	}
}
