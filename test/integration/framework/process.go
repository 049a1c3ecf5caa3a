package framework

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	"github.com/nativejobset/jobset/test/reporoot"
)

// Process is jobset-apiserver running as a separate, standalone process, for
// tests of what only a process has: signals, exit, restart on the same data.
type Process struct {
	Cmd *exec.Cmd
	// Config reaches the server as a member of system:masters.
	Config *rest.Config
	Client clientset.Interface
	// Dir holds the embedded etcd's data and the server's certificates.
	Dir string
	// Log is the process's combined output.
	Log *syncBuffer

	exited chan struct{}
	err    error
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// serverBinary builds cmd/jobset-apiserver (and the etcd helper) once per
// test binary.
func serverBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobset-apiserver-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "jobset-apiserver")
		root, err := reporoot.Dir()
		if err != nil {
			buildErr = err
			return
		}
		// The flags of 'make build', so that its compiled packages are reused.
		cmd := exec.Command(reporoot.GoCommand(), "build", "-trimpath", "-tags", "fieldsv1string", "-o", dir+"/",
			"./cmd/jobset-apiserver", "./test/integration/framework/etcdprocess")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// StartEtcdProcess runs an etcd member as its own process on a free
// loopback port, with its data in dir, and returns the process and its
// client URL. It is killed when the test ends.
func StartEtcdProcess(t testing.TB, dir string) (*exec.Cmd, string) {
	t.Helper()
	bin := filepath.Join(filepath.Dir(serverBinary(t)), "etcdprocess")
	port := freePort(t)
	cmd := exec.Command(bin, dir, strconv.Itoa(port))
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	})
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("etcd exited:\n%s", out.String())
		default:
		}
		return strings.Contains(out.String(), "serving "), nil
	})
	if err != nil {
		t.Fatalf("etcd did not start: %v", err)
	}
	return cmd, "http://127.0.0.1:" + strconv.Itoa(port)
}

// StartProcess starts jobset-apiserver standalone with its data in dir (a
// restart passes the same dir), listening on a free loopback port, and waits
// until /readyz answers ok. extraArgs are appended to the command line. The
// process is killed when the test ends if it still runs.
func StartProcess(t testing.TB, dir string, extraArgs ...string) *Process {
	t.Helper()
	bin := serverBinary(t)
	pki := filepath.Join(dir, "pki")
	caFile, clientCert, clientKey := clientPKI(t, pki)

	port := freePort(t)
	args := append([]string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--client-ca-file=" + caFile,
		"--embedded-etcd-dir=" + filepath.Join(dir, "etcd"),
	}, extraArgs...)
	p := &Process{Cmd: exec.Command(bin, args...), Dir: dir, Log: &syncBuffer{}, exited: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting jobset-apiserver: %v", err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("jobset-apiserver output:\n%s", p.Log.String())
		}
	})

	p.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(port),
		TLSClientConfig: rest.TLSClientConfig{
			// The server's self-signed certificate is written at start.
			Insecure: true,
			CertFile: clientCert,
			KeyFile:  clientKey,
		},
		QPS: 1000, Burst: 2000,
	}
	client, err := clientset.NewForConfig(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	p.Client = client
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			select {
			case <-p.exited:
				return false, fmt.Errorf("exited: %v", p.err)
			default:
			}
			body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil && string(body) == "ok", nil
		})
	if err != nil {
		t.Fatalf("jobset-apiserver did not become ready: %v\n%s", err, p.Log.String())
	}
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is the result of waiting for the process; valid once Exited is closed.
func (p *Process) ExitErr() error { return p.err }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// clientPKI writes a CA and a system:masters client certificate signed by
// it (reusing them when dir already has them) and returns the file names.
func clientPKI(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if _, err := os.Stat(keyFile); err == nil {
		return caFile, certFile, keyFile
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "test-ca"}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		caFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  keyPEM,
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

// syncBuffer is a bytes.Buffer safe for the process's two output streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
