package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/nativejobset/jobset/pkg/httpserver"
)

// secureMetricsOptions configure /metrics over HTTPS. Callers authenticate
// with a bearer token (checked with a TokenReview) or a client certificate
// of the cluster's client CA, and must be allowed get on the non-resource
// URL /metrics (a SubjectAccessReview). Both reviews go to the cluster's
// API server through client-go and are cached briefly.
type secureMetricsOptions struct {
	// bindAddress is host:port; empty disables the endpoint.
	bindAddress  string
	certFile     string
	keyFile      string
	certDir      string
	cipherSuites []string
	minTLS       string
	clientCAFile string
	authnConfig  string
	authzConfig  string
	cacheTTL     time.Duration
}

func newSecureMetricsOptions() *secureMetricsOptions {
	return &secureMetricsOptions{cacheTTL: 10 * time.Second}
}

func (o *secureMetricsOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.bindAddress, "secure-metrics-bind-address", o.bindAddress,
		"Address (host:port) serving Prometheus /metrics over HTTPS with authentication and authorization by the cluster's API server; empty disables it. Callers need get on the non-resource URL /metrics. Requests may carry at most 16 KiB of headers (else 431) and a bearer token of at most 8 KiB (else 401, without a TokenReview).")
	fs.StringVar(&o.certFile, "tls-cert-file", o.certFile,
		"Serving certificate of --secure-metrics-bind-address (reloaded when the file changes). Without it and --tls-private-key-file a self-signed certificate is made (written to --metrics-cert-dir when set, else kept in memory).")
	fs.StringVar(&o.keyFile, "tls-private-key-file", o.keyFile, "Private key of --tls-cert-file.")
	fs.StringVar(&o.certDir, "metrics-cert-dir", o.certDir,
		"Directory of the self-signed serving certificate (jobset-controller-metrics.crt and .key), reused when present.")
	fs.StringSliceVar(&o.cipherSuites, "tls-cipher-suites", o.cipherSuites,
		"Cipher suites of the HTTPS metrics endpoint (Go names); empty uses Go's defaults.")
	fs.StringVar(&o.minTLS, "tls-min-version", o.minTLS,
		"Minimum TLS version of the HTTPS metrics endpoint (VersionTLS12, VersionTLS13).")
	fs.StringVar(&o.clientCAFile, "client-ca-file", o.clientCAFile,
		"CA bundle whose client certificates authenticate to the HTTPS metrics endpoint (user: CommonName, groups: Organization), reloaded when the file changes. Empty uses the cluster's client CA from the ConfigMap kube-system/extension-apiserver-authentication, watched so that a rotated CA takes effect without a restart.")
	fs.StringVar(&o.authnConfig, "authentication-kubeconfig", o.authnConfig,
		"Kubeconfig of the API server that reviews tokens (TokenReview); empty uses the controller's own.")
	fs.StringVar(&o.authzConfig, "authorization-kubeconfig", o.authzConfig,
		"Kubeconfig of the API server that authorizes scrapes (SubjectAccessReview); empty uses the controller's own.")
	fs.DurationVar(&o.cacheTTL, "metrics-auth-cache-ttl", o.cacheTTL,
		"How long token and access review results of the HTTPS metrics endpoint are cached; 0 disables the cache.")
}

func (o *secureMetricsOptions) validate() []error {
	if o.bindAddress == "" {
		return nil
	}
	var errs []error
	if _, _, err := splitHostPort(o.bindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--secure-metrics-bind-address: %w", err))
	}
	if (o.certFile == "") != (o.keyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	if _, err := cipherSuites(o.cipherSuites); err != nil {
		errs = append(errs, fmt.Errorf("--tls-cipher-suites: %w", err))
	}
	if _, err := tlsVersion(o.minTLS); err != nil {
		errs = append(errs, fmt.Errorf("--tls-min-version: %w", err))
	}
	if o.cacheTTL < 0 {
		errs = append(errs, errors.New("--metrics-auth-cache-ttl must not be negative"))
	}
	return errs
}

func splitHostPort(addr string) (net.IP, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, err
	}
	ip := netutils.ParseIPSloppy(host)
	if host == "" {
		ip = net.IPv4zero
	}
	if ip == nil {
		return nil, 0, fmt.Errorf("%q is not an IP address", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, 0, fmt.Errorf("invalid port %q", portStr)
	}
	return ip, port, nil
}

func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = s.ID
	}
	var ids []uint16
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("unknown cipher suite %q", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func tlsVersion(name string) (uint16, error) {
	switch name {
	case "", "VersionTLS12":
		return tls.VersionTLS12, nil
	case "VersionTLS13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("unknown TLS version %q (VersionTLS12 or VersionTLS13)", name)
}

// reviewClient is a client of the API server a kubeconfig names, or of the
// controller's own when path is empty, with a rate limit of its own.
func reviewClient(own *rest.Config, path string) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(own)
	if path != "" {
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, err
		}
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.RateLimiter = nil
	return kubernetes.NewForConfig(cfg)
}

// serveSecureMetrics serves h on /metrics over HTTPS until ctx ends. own is
// the controller's client configuration.
func serveSecureMetrics(ctx context.Context, o *secureMetricsOptions, own *rest.Config, h http.Handler) (net.Addr, error) {
	authnClient, err := reviewClient(own, o.authnConfig)
	if err != nil {
		return nil, fmt.Errorf("--authentication-kubeconfig: %w", err)
	}
	authzClient, err := reviewClient(own, o.authzConfig)
	if err != nil {
		return nil, fmt.Errorf("--authorization-kubeconfig: %w", err)
	}
	clientCA, err := clientCAs(ctx, o.clientCAFile, authnClient)
	if err != nil {
		return nil, err
	}
	auth := newMetricsAuth(authnClient.AuthenticationV1().TokenReviews(), authzClient.AuthorizationV1().SubjectAccessReviews(), o.cacheTTL)
	return listenSecureMetrics(ctx, o, auth, clientCA, h)
}

// listenSecureMetrics serves h behind auth. clientCA, when not nil, gives
// the CAs of client certificates at each handshake; when it is nil (or
// returns nil) client certificates are not asked for.
func listenSecureMetrics(ctx context.Context, o *secureMetricsOptions, auth *metricsAuth, clientCA func() *x509.CertPool, h http.Handler) (net.Addr, error) {
	getCert, err := servingCertificate(o)
	if err != nil {
		return nil, err
	}
	suites, _ := cipherSuites(o.cipherSuites)
	minVersion, _ := tlsVersion(o.minTLS)
	tlsCfg := &tls.Config{
		MinVersion:     minVersion,
		CipherSuites:   suites,
		GetCertificate: getCert,
		NextProtos:     []string{"h2", "http/1.1"},
	}
	if clientCA != nil {
		// Each handshake verifies against the CA of that moment, so a
		// replaced CA file takes effect without a restart. The config is
		// cloned only when the pool changes, not at every handshake.
		var withCA atomic.Pointer[tls.Config]
		tlsCfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool := clientCA()
			if pool == nil {
				return nil, nil // tlsCfg itself: no client certificates
			}
			if c := withCA.Load(); c != nil && c.ClientCAs == pool {
				return c, nil
			}
			c := tlsCfg.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs = pool
			c.ClientAuth = tls.VerifyClientCertIfGiven
			withCA.Store(c)
			return c, nil
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", auth.wrap(h))

	ln, err := net.Listen("tcp", o.bindAddress)
	if err != nil {
		return nil, fmt.Errorf("listening on --secure-metrics-bind-address %s: %w", o.bindAddress, err)
	}
	httpserver.Serve(ctx, "secure metrics", secureMetricsServer(mux, tlsCfg), ln)
	klog.InfoS("Serving metrics over HTTPS", "address", ln.Addr().String())
	return ln.Addr(), nil
}

// secureMetricsServer is the HTTP server of the endpoint, with the limits
// of every server: unauthenticated clients reach it.
func secureMetricsServer(h http.Handler, tlsCfg *tls.Config) *http.Server {
	srv := httpserver.New(h)
	srv.TLSConfig = tlsCfg
	return srv
}

// clientCAs returns the source of the CAs whose client certificates
// authenticate: --client-ca-file, reloaded when the file changes, else the
// cluster's client CA as kube-apiserver publishes it for extension servers
// in the ConfigMap kube-system/extension-apiserver-authentication, watched
// so that a rotated CA takes effect without a restart. The source gives nil
// while there is no valid CA: then only tokens work.
func clientCAs(ctx context.Context, file string, kube kubernetes.Interface) (func() *x509.CertPool, error) {
	var ca dynamiccertificates.CAContentProvider
	if file != "" {
		fromFile, err := dynamiccertificates.NewDynamicCAContentFromFile("metrics-client-ca", file)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		go fromFile.Run(ctx, 1)
		ca = fromFile
	} else {
		fromConfigMap, err := dynamiccertificates.NewDynamicCAFromConfigMapController("metrics-client-ca",
			metav1.NamespaceSystem, "extension-apiserver-authentication", "client-ca-file", kube)
		if err != nil {
			return nil, err
		}
		go fromConfigMap.Run(ctx, 1)
		ca = fromConfigMap
	}
	return func() *x509.CertPool {
		// The last valid content stays in use while a new one is bad.
		opts, ok := ca.VerifyOptions()
		if !ok {
			return nil
		}
		return opts.Roots
	}, nil
}

// servingCertificate returns the TLS certificate callback: the files of
// --tls-cert-file and --tls-private-key-file, reloaded when they change, or
// a self-signed certificate for 127.0.0.1 and localhost.
func servingCertificate(o *secureMetricsOptions) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if o.certFile != "" {
		r := &certReloader{certFile: o.certFile, keyFile: o.keyFile}
		if _, err := r.get(nil); err != nil {
			return nil, err
		}
		return r.get, nil
	}
	certPEM, keyPEM, err := selfSigned(o.certDir)
	if err != nil {
		return nil, fmt.Errorf("creating the self-signed metrics certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, nil
}

// selfSigned returns the self-signed pair of dir (made there when missing),
// or a new one in memory when dir is empty.
func selfSigned(dir string) (certPEM, keyPEM []byte, err error) {
	generate := func() ([]byte, []byte, error) {
		return certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	}
	if dir == "" {
		return generate()
	}
	crt, key := filepath.Join(dir, "jobset-controller-metrics.crt"), filepath.Join(dir, "jobset-controller-metrics.key")
	c, errC := os.ReadFile(crt)
	k, errK := os.ReadFile(key)
	if errC == nil && errK == nil {
		return c, k, nil
	}
	if certPEM, keyPEM, err = generate(); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(crt, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}
