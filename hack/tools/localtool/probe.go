package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	caFile := fs.String("cacert", "", "CA bundle that must have signed the server certificate")
	certFile := fs.String("cert", "", "client certificate (optional)")
	keyFile := fs.String("key", "", "client key (optional)")
	timeout := fs.Duration("timeout", 2*time.Second, "request timeout")
	quiet := fs.Bool("q", false, "print nothing on failure")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: localtool probe [-cacert FILE] [-cert FILE -key FILE] URL")
	}
	raw := fs.Arg(0)
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme == "https" && *caFile == "":
		return errors.New("https:// needs -cacert")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		// Plain HTTP only for health ports that never leave the machine.
		return errors.New("http:// is only probed on loopback addresses")
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if *caFile != "" {
		caPEM, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("%s: no certificates", *caFile)
		}
		tlsConfig.RootCAs = pool
	}
	if *certFile != "" || *keyFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	client := &http.Client{
		Timeout:   *timeout,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil},
	}
	resp, err := client.Get(raw)
	if err != nil {
		if *quiet {
			os.Exit(1)
		}
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		if *quiet {
			os.Exit(1)
		}
		return fmt.Errorf("%s: %s: %s", raw, resp.Status, strings.TrimSpace(string(body)))
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
