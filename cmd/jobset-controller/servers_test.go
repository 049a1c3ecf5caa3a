package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nativejobset/jobset/pkg/httpserver"
)

// The plain-HTTP metrics and health servers have the limits of the HTTPS
// one: headers above 16 KiB are refused (431) before any handler runs, and
// every timeout is set.
func TestPlainServersLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The handler sees the server that runs it.
	servers := make(chan *http.Server, 4)
	capture := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
		servers <- srv
	})
	metricsAddr, err := serveMetrics(ctx, "127.0.0.1:0", capture, false)
	if err != nil {
		t.Fatal(err)
	}
	profilingAddr, err := serveMetrics(ctx, "127.0.0.1:0", capture, true)
	if err != nil {
		t.Fatal(err)
	}
	healthAddr, err := serveHealth(ctx, "127.0.0.1:0", nil, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, url    string
		writeTimeout time.Duration
	}{
		{"metrics", "http://" + metricsAddr.String() + "/metrics", httpserver.WriteTimeout},
		{"metrics with profiling", "http://" + profilingAddr.String() + "/metrics", profileWriteTimeout},
	} {
		if code, err := get(tc.url, 0); err != nil || code != http.StatusOK {
			t.Fatalf("%s: GET: %d %v", tc.name, code, err)
		}
		srv := <-servers
		if srv == nil {
			t.Fatalf("%s: no server in the request's context", tc.name)
		}
		if srv.ReadHeaderTimeout != httpserver.ReadHeaderTimeout || srv.ReadTimeout != httpserver.ReadTimeout ||
			srv.IdleTimeout != httpserver.IdleTimeout || srv.WriteTimeout != tc.writeTimeout || srv.MaxHeaderBytes != httpserver.MaxHeaderBytes {
			t.Errorf("%s: read header %v, read %v, write %v (want %v), idle %v, max header bytes %d",
				tc.name, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, tc.writeTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
		}
	}
	// Go's pprof refuses a profile as long as the write timeout; its
	// default is 30s.
	if profileWriteTimeout <= 30*time.Second {
		t.Errorf("profileWriteTimeout %v does not allow pprof's default 30s profile", profileWriteTimeout)
	}

	for _, url := range []string{"http://" + metricsAddr.String() + "/metrics", "http://" + healthAddr.String() + "/readyz"} {
		if code, err := get(url, 2*httpserver.MaxHeaderBytes); err != nil || code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s with %d KiB of headers: %d %v, want 431", url, 2*httpserver.MaxHeaderBytes>>10, code, err)
		}
	}
	if len(servers) != 0 {
		t.Error("a handler ran for a request over the header limit")
	}
	if code, err := get("http://"+healthAddr.String()+"/readyz", httpserver.MaxHeaderBytes/2); err != nil || code != http.StatusOK {
		t.Errorf("/readyz with %d KiB of headers: %d %v, want 200", httpserver.MaxHeaderBytes/2>>10, code, err)
	}

	// The servers stop with their context.
	cancel()
	for _, addr := range []net.Addr{metricsAddr, profilingAddr, healthAddr} {
		eventuallyRefused(t, addr)
	}
}

// get GETs url on a new connection with padding bytes of extra headers
// and returns the status.
func get(url string, padding int) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if padding > 0 {
		req.Header.Set("X-Padding", strings.Repeat("p", padding))
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// eventuallyRefused waits until nothing listens on addr any more.
func eventuallyRefused(t *testing.T, addr net.Addr) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			return true, nil
		}
		c.Close()
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s still accepts connections after its context ended: %v", addr, err)
	}
}
