package embeddedetcd

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The data written before a restart is there after it, in the same directory.
func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	put := func(s *Server) {
		c := client(t, s)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, "/registry/probe", "kept"); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	s, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	put(s)
	s.Stop()

	s, err = Start(Config{Dir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer s.Stop()
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/registry/probe")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept" {
		t.Fatalf("value after restart = %v, want kept", resp.Kvs)
	}
}

func TestNeedsDirectory(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without a directory succeeded")
	}
}

func client(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.ClientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The member keeps few raft entries in memory (it has no followers to send
// them to), fsyncs unless told not to, and without fsync still keeps its
// data across a clean restart.
func TestRaftMemoryAndFsync(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.etcd.Server.Cfg.SnapshotCatchUpEntries; got != snapshotCatchUpEntries {
		t.Errorf("SnapshotCatchUpEntries = %d, want %d", got, snapshotCatchUpEntries)
	}
	if s.etcd.Server.Cfg.UnsafeNoFsync {
		t.Errorf("fsync is off by default")
	}
	s.Stop()

	s, err = Start(Config{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if !s.etcd.Server.Cfg.UnsafeNoFsync {
		t.Errorf("UnsafeNoFsync did not reach etcd")
	}
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/registry/nofsync", "kept"); err != nil {
		t.Fatalf("put: %v", err)
	}
	c.Close()
	s.Stop()

	s, err = Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c = client(t, s)
	defer c.Close()
	resp, err := c.Get(ctx, "/registry/nofsync")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept" {
		t.Fatalf("value after restart = %v, want kept", resp.Kvs)
	}
}
