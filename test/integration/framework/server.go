// Package framework starts a real jobset-apiserver in the test process, on
// 127.0.0.1 with an embedded etcd in a temporary directory.
package framework

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apiserver"
	clientset "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// Server is a running in-process API server.
type Server struct {
	// Config reaches the server as a member of system:masters.
	Config *rest.Config
	// Client is a typed client built from Config.
	Client clientset.Interface
	// EtcdDir holds the embedded etcd's data.
	EtcdDir string

	stop func()
}

// Stop shuts the server and its embedded etcd down, waiting until both have
// stopped. It is safe to call more than once; the test cleanup calls it too.
// Afterwards EtcdDir may be handed to StartServerInDir.
func (s *Server) Stop() { s.stop() }

// StartServer starts a standalone server (no kube-apiserver behind it) and
// stops it when the test ends. It returns once /readyz answers ok.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerWithOptions(t, nil)
}

// StartServerWithOptions lets a test adjust the options before start.
func StartServerWithOptions(t testing.TB, adjust func(*apiserver.Options)) *Server {
	t.Helper()
	return StartServerInDir(t, t.TempDir(), adjust)
}

// StartServerInDir starts a server whose embedded etcd keeps its data in
// etcdDir. Starting a second server on the directory of a stopped one
// brings the stored objects back, as a restart of the process would.
func StartServerInDir(t testing.TB, etcdDir string, adjust func(*apiserver.Options)) *Server {
	t.Helper()
	opts := apiserver.NewOptions(io.Discard, io.Discard)
	opts.EmbeddedEtcdDir = etcdDir

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on loopback: %v", err)
	}
	opts.Recommended.SecureServing.Listener = listener
	opts.Recommended.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.Recommended.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	opts.Recommended.SecureServing.ServerCert.CertDirectory = t.TempDir()
	// No load balancer to drain in a test: stop without the readiness delay.
	opts.ServerRun.ShutdownDelayDuration = 0
	if adjust != nil {
		adjust(opts)
	}

	if err := opts.Complete(); err != nil {
		t.Fatalf("completing options: %v", err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("validating options: %v", err)
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatalf("building config: %v", err)
	}
	srv, err := cfg.Complete().New()
	if err != nil {
		t.Fatalf("building server: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := srv.GenericAPIServer.PrepareRun().RunWithContext(ctx); err != nil {
			t.Errorf("server stopped with error: %v", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-stopped
			opts.StopEmbeddedEtcd()
		})
	}
	t.Cleanup(stop)

	restCfg := rest.CopyConfig(srv.GenericAPIServer.LoopbackClientConfig)
	restCfg.QPS, restCfg.Burst = 1000, 2000
	client, err := clientset.NewForConfig(restCfg)
	if err != nil {
		t.Fatalf("building client: %v", err)
	}
	waitReady(t, client)
	return &Server{Config: restCfg, Client: client, EtcdDir: etcdDir, stop: stop}
}

func waitReady(t testing.TB, client clientset.Interface) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil && string(body) == "ok", nil
		})
	if err != nil {
		t.Fatalf("server did not become ready: %v", err)
	}
}

// MustCreate creates the JobSet with the given field manager (empty for the
// client's default) and fails the test on error.
func (s *Server) MustCreate(t testing.TB, js *v1alpha2.JobSet, fieldManager string) *v1alpha2.JobSet {
	t.Helper()
	out, err := s.Client.JobsetV1alpha2().JobSets(js.Namespace).Create(context.Background(), js, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		t.Fatalf("create %s/%s: %v", js.Namespace, js.Name, err)
	}
	return out
}

// MustGet reads a JobSet and fails the test on error.
func (s *Server) MustGet(t testing.TB, ns, name string) *v1alpha2.JobSet {
	t.Helper()
	out, err := s.Client.JobsetV1alpha2().JobSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s/%s: %v", ns, name, err)
	}
	return out
}
