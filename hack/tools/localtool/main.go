// Command localtool is the helper of the local development cluster started by
// hack/local-up.sh. It uses the Go standard library only, so the local stack
// needs neither openssl nor curl.
//
//	localtool ca    -out DIR/NAME -cn COMMON_NAME
//	localtool cert  -ca DIR/CA -out DIR/NAME -cn CN [-o ORG,...] [-san HOST_OR_IP,...] [-server] [-client]
//	localtool key   -out DIR/NAME
//	localtool probe [-cacert FILE] [-cert FILE -key FILE] [-timeout 2s] URL
//	localtool lb    -listen 127.0.0.1:PORT [-listen-interface BRIDGE] -backends 127.0.0.1:A,127.0.0.1:B,...
//	localtool node  up|down -local-dir DIR -bin-dir DIR [flags]
//
// "ca" writes NAME.crt and NAME.key; "cert" writes NAME.crt and NAME.key signed
// by CA.crt/CA.key; "key" writes a bare key pair NAME.key and NAME.pub (the
// service-account signing key). Keys are ECDSA P-256 in PKCS#8 PEM. These
// commands are idempotent: files that already exist and are still valid for
// the request are left alone, so restarting the stack keeps its credentials
// (and kubeconfigs handed out earlier keep working).
//
// "probe" makes one GET request and exits 0 only on a 200 response. An
// https:// server is verified against -cacert; plain http:// is accepted for
// loopback addresses only (health ports). It is the building block of the
// bounded readiness waits in hack/local-up.sh.
//
// "lb" is a round-robin TCP load balancer on loopback with failover to the
// next backend when one refuses: the local stand-in for a Service's endpoints
// in front of several jobset-apiserver replicas (lb.go). With
// -listen-interface it may also listen on an address of that interface (the
// real node's bridge, where pods reach kube-apiserver).
//
// "node" starts and stops the local cluster's real node (package node).
package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/node"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// A file expiring sooner than this is replaced.
	renewBefore = 7 * 24 * time.Hour
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "ca":
		err = runCA(os.Args[2:])
	case "cert":
		err = runCert(os.Args[2:])
	case "key":
		err = runKey(os.Args[2:])
	case "probe":
		err = runProbe(os.Args[2:])
	case "lb":
		err = runLB(os.Args[2:])
	case "node":
		err = node.Main(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localtool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localtool ca|cert|key|probe|lb|node [flags]; see the package comment")
	os.Exit(2)
}

func runCA(args []string) error {
	fs := flag.NewFlagSet("ca", flag.ExitOnError)
	out := fs.String("out", "", "output path without extension")
	cn := fs.String("cn", "", "common name")
	_ = fs.Parse(args)
	if *out == "" || *cn == "" {
		return errors.New("-out and -cn are required")
	}
	if cert, _, err := loadPair(*out); err == nil && fresh(cert) && cert.IsCA {
		return nil
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: *cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID(key.Public()),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	fmt.Printf("created CA %s.crt (%s)\n", *out, *cn)
	return writePair(*out, der, key)
}

func runCert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ExitOnError)
	caPath := fs.String("ca", "", "CA path without extension")
	out := fs.String("out", "", "output path without extension")
	cn := fs.String("cn", "", "common name (the user name for client certificates)")
	orgs := fs.String("o", "", "comma-separated organizations (the groups for client certificates)")
	sans := fs.String("san", "", "comma-separated DNS names and IP addresses")
	server := fs.Bool("server", false, "allow server authentication")
	client := fs.Bool("client", false, "allow client authentication")
	_ = fs.Parse(args)
	if *caPath == "" || *out == "" || *cn == "" || (!*server && !*client) {
		return errors.New("-ca, -out, -cn and at least one of -server/-client are required")
	}
	caCert, caKey, err := loadPair(*caPath)
	if err != nil {
		return fmt.Errorf("loading CA: %w", err)
	}

	var dnsNames []string
	var ips []net.IP
	for _, s := range splitList(*sans) {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, s)
		}
	}
	var usages []x509.ExtKeyUsage
	if *server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if *client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	subject := pkix.Name{CommonName: *cn, Organization: splitList(*orgs)}

	if cert, _, err := loadPair(*out); err == nil && reusable(cert, caCert, subject, dnsNames, ips, usages) {
		return nil
	}

	key, err := newKey()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           usages,
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		AuthorityKeyId:        caCert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return err
	}
	fmt.Printf("created %s.crt (CN=%s)\n", *out, *cn)
	return writePair(*out, der, key)
}

func runKey(args []string) error {
	fs := flag.NewFlagSet("key", flag.ExitOnError)
	out := fs.String("out", "", "output path without extension")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("-out is required")
	}
	if _, err := os.Stat(*out + ".key"); err == nil {
		if _, err := os.Stat(*out + ".pub"); err == nil {
			return nil
		}
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writeFile(*out+".key", keyPEM, 0o600); err != nil {
		return err
	}
	fmt.Printf("created key pair %s.key\n", *out)
	return writeFile(*out+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

// reusable reports whether an existing certificate still matches a request.
func reusable(cert, ca *x509.Certificate, subject pkix.Name, dnsNames []string, ips []net.IP, usages []x509.ExtKeyUsage) bool {
	if !fresh(cert) || cert.CheckSignatureFrom(ca) != nil {
		return false
	}
	if cert.Subject.CommonName != subject.CommonName || !sameSet(cert.Subject.Organization, subject.Organization) {
		return false
	}
	if !sameSet(cert.DNSNames, dnsNames) || !slices.Equal(cert.ExtKeyUsage, usages) {
		return false
	}
	have := make([]string, 0, len(cert.IPAddresses))
	for _, ip := range cert.IPAddresses {
		have = append(have, ip.String())
	}
	want := make([]string, 0, len(ips))
	for _, ip := range ips {
		want = append(want, ip.String())
	}
	return sameSet(have, want)
}

func fresh(cert *x509.Certificate) bool {
	return time.Now().Add(renewBefore).Before(cert.NotAfter)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}

func keyID(pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(der)
	return sum[:20]
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func writePair(out string, certDER []byte, key crypto.Signer) error {
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	// Key first: a reader that sees the new certificate must find its key.
	if err := writeFile(out+".key", keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(out+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o644)
}

// writeFile replaces path atomically.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func loadPair(path string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(path + ".crt")
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(path + ".key")
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s.crt: no certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s.key: no key", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s.key: not a signing key", path)
	}
	// The pair must belong together.
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(pubDER, cert.RawSubjectPublicKeyInfo) {
		return nil, nil, fmt.Errorf("%s: key does not match certificate", path)
	}
	return cert, key, nil
}
