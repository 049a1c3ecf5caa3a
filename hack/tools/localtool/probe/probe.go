// Package probe makes the local cluster's readiness checks: one GET that
// succeeds only on a 200 response. An https:// server is verified against
// a CA bundle; plain http:// is allowed for loopback addresses only (health
// ports that never leave the machine).
package probe

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options are the credentials and limits of a probe.
type Options struct {
	CACert   string // CA bundle that must have signed an https server's certificate
	CertFile string // client certificate (optional)
	KeyFile  string
	Timeout  time.Duration // per request; 2s when zero
}

// Get makes one GET request to rawURL; only a 200 response is success.
func Get(rawURL string, o Options) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme == "https" && o.CACert == "":
		return errors.New("https:// needs a CA bundle")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return errors.New("http:// is only probed on loopback addresses")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CACert != "" {
		caPEM, err := os.ReadFile(o.CACert)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("%s: no certificates", o.CACert)
		}
		tlsConfig.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	client := &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil, DisableKeepAlives: true},
	}
	resp, err := client.Get(rawURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", rawURL, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
