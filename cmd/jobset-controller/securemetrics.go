package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// secureMetricsOptions configure /metrics over HTTPS with authentication
// (TokenReview, client certificates) and authorization
// (SubjectAccessReview of get on the non-resource URL /metrics) delegated
// to the cluster's API server, as kube-apiserver's aggregated servers and
// metrics-server do.
type secureMetricsOptions struct {
	// bindAddress is host:port; empty disables the endpoint.
	bindAddress string
	serving     *genericoptions.SecureServingOptionsWithLoopback
	authn       *genericoptions.DelegatingAuthenticationOptions
	authz       *genericoptions.DelegatingAuthorizationOptions
}

func newSecureMetricsOptions() *secureMetricsOptions {
	o := &secureMetricsOptions{
		serving: genericoptions.NewSecureServingOptions().WithLoopback(),
		authn:   genericoptions.NewDelegatingAuthenticationOptions(),
		authz:   genericoptions.NewDelegatingAuthorizationOptions(),
	}
	o.serving.ServerCert.PairName = "jobset-controller-metrics"
	o.serving.ServerCert.CertDirectory = ""
	return o
}

func (o *secureMetricsOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.bindAddress, "secure-metrics-bind-address", o.bindAddress,
		"Address (host:port) serving Prometheus /metrics over HTTPS with delegated authentication and authorization; empty disables it. Callers need get on the non-resource URL /metrics.")
	fs.StringVar(&o.serving.ServerCert.CertKey.CertFile, "tls-cert-file", o.serving.ServerCert.CertKey.CertFile,
		"Serving certificate of --secure-metrics-bind-address. Without it and --tls-private-key-file a self-signed certificate is made (written to --metrics-cert-dir when set, else kept in memory).")
	fs.StringVar(&o.serving.ServerCert.CertKey.KeyFile, "tls-private-key-file", o.serving.ServerCert.CertKey.KeyFile,
		"Private key of --tls-cert-file.")
	fs.StringVar(&o.serving.ServerCert.CertDirectory, "metrics-cert-dir", o.serving.ServerCert.CertDirectory,
		"Directory of the self-signed serving certificate (jobset-controller-metrics.crt and .key), reused when present.")
	fs.StringSliceVar(&o.serving.CipherSuites, "tls-cipher-suites", o.serving.CipherSuites,
		"Cipher suites of the HTTPS metrics endpoint (Go names); empty uses Go's defaults.")
	fs.StringVar(&o.serving.MinTLSVersion, "tls-min-version", o.serving.MinTLSVersion,
		"Minimum TLS version of the HTTPS metrics endpoint (VersionTLS12, VersionTLS13).")
	o.authn.AddFlags(fs)
	o.authz.AddFlags(fs)
}

func (o *secureMetricsOptions) validate() []error {
	if o.bindAddress == "" {
		return nil
	}
	var errs []error
	if _, _, err := splitHostPort(o.bindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--secure-metrics-bind-address: %w", err))
	}
	if (o.serving.ServerCert.CertKey.CertFile == "") != (o.serving.ServerCert.CertKey.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	errs = append(errs, o.authn.Validate()...)
	errs = append(errs, o.authz.Validate()...)
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

// serveSecureMetrics serves h on /metrics over HTTPS until ctx ends.
// kubeconfig is the controller's own; it also reaches the API server that
// reviews tokens and authorizes requests unless the authentication and
// authorization kubeconfig flags name another.
func serveSecureMetrics(ctx context.Context, o *secureMetricsOptions, kubeconfig string, h http.Handler) error {
	ip, port, err := splitHostPort(o.bindAddress)
	if err != nil {
		return fmt.Errorf("--secure-metrics-bind-address: %w", err)
	}
	o.serving.BindAddress, o.serving.BindPort = ip, port
	if port == 0 {
		// Port 0 (tests): listen here so the chosen port is known.
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			return err
		}
		o.serving.Listener = ln
	}
	if err := o.serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return fmt.Errorf("creating the self-signed metrics certificate: %w", err)
	}
	if o.authn.RemoteKubeConfigFile == "" {
		o.authn.RemoteKubeConfigFile = kubeconfig
	}
	if o.authz.RemoteKubeConfigFile == "" {
		o.authz.RemoteKubeConfigFile = kubeconfig
	}

	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	cfg := genericapiserver.NewConfig(serializer.NewCodecFactory(scheme))
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// Only /metrics (and the health checks) are served.
	cfg.EnableIndex, cfg.EnableProfiling, cfg.EnableMetrics, cfg.EnableDiscovery = false, false, false, false
	cfg.SkipOpenAPIInstallation = true
	// The generic server needs a loopback client (an in-memory certificate);
	// nothing here uses it.
	if err := o.serving.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return err
	}
	if err := o.authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	// A request without credentials is refused with 401 rather than
	// authorized as system:anonymous (the delegating authenticator always
	// admits anonymous requests).
	cfg.Authentication.Authenticator = rejectAnonymous{cfg.Authentication.Authenticator}
	if err := o.authz.ApplyTo(&cfg.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	srv, err := cfg.Complete(nil).New("jobset-controller-metrics", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	srv.Handler.NonGoRestfulMux.Handle("/metrics", h)
	prepared := srv.PrepareRun()
	go func() {
		if err := prepared.RunWithContext(ctx); err != nil {
			klog.ErrorS(err, "Secure metrics server stopped")
		}
	}()
	klog.InfoS("Serving metrics over HTTPS", "address", cfg.SecureServing.Listener.Addr().String())
	return nil
}

// rejectAnonymous fails the authentication of anonymous requests.
type rejectAnonymous struct{ authenticator.Request }

func (r rejectAnonymous) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	resp, ok, err := r.Request.AuthenticateRequest(req)
	if ok && resp != nil && resp.User != nil && resp.User.GetName() == user.Anonymous {
		return nil, false, nil
	}
	return resp, ok, err
}
