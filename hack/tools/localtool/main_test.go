package main

import (
	"github.com/nativejobset/jobset/hack/tools/localtool/pki"

	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func mustRun(t *testing.T, f func([]string) error, args ...string) {
	t.Helper()
	if err := f(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

func modTime(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime().UnixNano()
}

func certSerial(t *testing.T, path string) string {
	t.Helper()
	cert, _, err := pki.LoadPair(path)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

func TestCertificatesAreReusedUntilTheRequestChanges(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	leaf := filepath.Join(dir, "leaf")

	mustRun(t, runCA, "-out", ca, "-cn", "test-ca")
	caSerial := certSerial(t, ca)
	mustRun(t, runCA, "-out", ca, "-cn", "test-ca")
	if certSerial(t, ca) != caSerial {
		t.Fatal("an existing CA was replaced")
	}

	args := []string{"-ca", ca, "-out", leaf, "-cn", "system:test", "-o", "group-a,group-b", "-san", "localhost,127.0.0.1", "-server", "-client"}
	mustRun(t, runCert, args...)
	first := certSerial(t, leaf)
	mustRun(t, runCert, args...)
	if certSerial(t, leaf) != first {
		t.Fatal("an unchanged certificate request replaced the certificate")
	}

	// Another SAN, another group or another CA must each give a new certificate.
	mustRun(t, runCert, "-ca", ca, "-out", leaf, "-cn", "system:test", "-o", "group-a,group-b", "-san", "localhost,127.0.0.1,example.internal", "-server", "-client")
	second := certSerial(t, leaf)
	if second == first {
		t.Fatal("a changed SAN list kept the old certificate")
	}
	mustRun(t, runCert, "-ca", ca, "-out", leaf, "-cn", "system:test", "-o", "group-a", "-san", "localhost,127.0.0.1,example.internal", "-server", "-client")
	third := certSerial(t, leaf)
	if third == second {
		t.Fatal("a changed organization list kept the old certificate")
	}
	if err := os.Remove(ca + ".crt"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, runCA, "-out", ca, "-cn", "test-ca")
	mustRun(t, runCert, "-ca", ca, "-out", leaf, "-cn", "system:test", "-o", "group-a", "-san", "localhost,127.0.0.1,example.internal", "-server", "-client")
	if certSerial(t, leaf) == third {
		t.Fatal("a certificate of a replaced CA was kept")
	}

	cert, key, err := pki.LoadPair(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if key == nil || cert.Subject.CommonName != "system:test" || !slices.Equal(cert.Subject.Organization, []string{"group-a"}) {
		t.Fatalf("unexpected subject %v", cert.Subject)
	}
	caCert, _, err := pki.LoadPair(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.internal", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	if st, err := os.Stat(leaf + ".key"); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
}

func TestKeyPairIsKept(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sa")
	mustRun(t, runKey, "-out", out)
	before := modTime(t, out+".key")
	mustRun(t, runKey, "-out", out)
	if modTime(t, out+".key") != before {
		t.Fatal("an existing key pair was replaced")
	}
	if _, err := os.Stat(out + ".pub"); err != nil {
		t.Fatal(err)
	}
}

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	srv := filepath.Join(dir, "srv")
	mustRun(t, runCA, "-out", ca, "-cn", "probe-ca")
	mustRun(t, runCert, "-ca", ca, "-out", srv, "-cn", "srv", "-san", "127.0.0.1", "-server")

	pair, err := tls.LoadX509KeyPair(srv+".crt", srv+".key")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/bad", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	server := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}}}
	go func() { _ = server.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = server.Close() })
	base := "https://" + ln.Addr().String()

	if err := runProbe([]string{"-cacert", ca + ".crt", base + "/ok"}); err != nil {
		t.Fatalf("probe of a healthy endpoint: %v", err)
	}
	if err := runProbe([]string{"-cacert", ca + ".crt", base + "/bad"}); err == nil {
		t.Fatal("probe of a 503 endpoint succeeded")
	}
	other := filepath.Join(dir, "other")
	mustRun(t, runCA, "-out", other, "-cn", "other-ca")
	if err := runProbe([]string{"-cacert", other + ".crt", base + "/ok"}); err == nil {
		t.Fatal("probe trusted a server signed by another CA")
	}
	if err := runProbe([]string{"http://192.0.2.1:80/healthz"}); err == nil {
		t.Fatal("plain HTTP to a non-loopback address was allowed")
	}
}
