package embeddedetcd

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// By default the client and peer listeners are sockets inside the data
// directory, made 0700 even when it existed: no TCP port, and the server's
// storage client reaches etcd through the socket.
func TestClientSocketInPrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	sock := filepath.Join(dir, socketName)
	if s.ClientURL != "unix://"+sock {
		t.Errorf("ClientURL = %q, want the socket %s", s.ClientURL, sock)
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory mode = %o, want 700", perm)
	}
	for _, name := range []string{socketName, peerSocketName} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("no socket %s in the data directory: %v", name, err)
		}
	}
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/registry/probe", "v"); err != nil {
		t.Fatalf("put through the socket: %v", err)
	}
}

func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if _, err := Start(Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("Start with a %d-byte socket path: err = %v, want a clear error", len(dir)+len(socketName)+1, err)
	}
}

// On a loopback TCP port, HTTP requests as a web page would send them
// (through DNS rebinding: a foreign Host; cross-origin: an Origin header)
// read no data: the JSON gateway is off, foreign hosts are refused, and no
// origin is granted CORS access. The same key is readable over gRPC.
func TestHTTPFromBrowsersGetsNoData(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir(), ClientPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const secret = "secret-value-1234"
	if _, err := c.Put(ctx, "/registry/secret", secret); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, "/registry/secret"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("gRPC get: %v %v", resp, err)
	}

	rangeBody := `{"key":"` + base64.StdEncoding.EncodeToString([]byte("/registry/secret")) + `"}`
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		wantCode                 int
	}{
		{"foreign host", "POST", "/v3/kv/range", rangeBody, map[string]string{"Host": "evil.example:80"}, http.StatusMisdirectedRequest},
		{"foreign host, health", "GET", "/health", "", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
		{"origin", "POST", "/v3/kv/range", rangeBody, map[string]string{"Origin": "http://evil.example"}, http.StatusNotFound},
		{"preflight", "OPTIONS", "/v3/kv/range", "", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.ClientURL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode {
				t.Errorf("status %d, want %d (body %q)", resp.StatusCode, tc.wantCode, body)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("Access-Control-Allow-Origin: %q, want none", got)
			}
			if strings.Contains(string(body), base64.StdEncoding.EncodeToString([]byte(secret))) || strings.Contains(string(body), secret) {
				t.Errorf("the response carries the stored value: %q", body)
			}
		})
	}
}

// A plaintext client port says loudly, at start, what it exposes; the
// default unix socket says nothing of the kind.
func TestPlaintextClientPortWarns(t *testing.T) {
	var logged bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	defer func() {
		klog.SetOutput(io.Discard)
		klog.LogToStderr(true)
	}()
	start := func(cfg Config) string {
		logged.Reset()
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Stop()
		klog.Flush()
		return logged.String()
	}
	if out := start(Config{Dir: t.TempDir()}); strings.Contains(out, "UNSAFE") {
		t.Errorf("the unix socket logged an unsafe warning:\n%s", out)
	}
	port := freePort(t)
	out := start(Config{Dir: t.TempDir(), ClientPort: port})
	if !strings.Contains(out, "UNSAFE") || !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Errorf("a plaintext client port on %d logged no warning naming it:\n%s", port, out)
	}
}
