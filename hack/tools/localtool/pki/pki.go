// Package pki makes the local cluster's certificates and keys: ECDSA P-256
// keys in PKCS#8 PEM, a CA pair NAME.crt/NAME.key, leaf pairs signed by it,
// and bare key pairs NAME.key/NAME.pub (the service-account signing key).
// Every function is idempotent: files that exist and still fit the request
// are left alone, so a restarted cluster keeps its credentials (and
// kubeconfigs handed out earlier keep working).
package pki

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
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// A file expiring sooner than this is replaced.
	renewBefore = 7 * 24 * time.Hour
)

// EnsureCA writes the CA pair out.crt/out.key unless a valid CA is there;
// it reports whether it made a new one.
func EnsureCA(out, cn string) (bool, error) {
	if out == "" || cn == "" {
		return false, errors.New("a CA needs a path and a common name")
	}
	if cert, _, err := LoadPair(out); err == nil && fresh(cert) && cert.IsCA {
		return false, nil
	}
	key, err := newKey()
	if err != nil {
		return false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID(key.Public()),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return false, err
	}
	return true, writePair(out, der, key)
}

// Cert is a request for a leaf certificate.
type Cert struct {
	CA   string // the CA's path without extension
	Out  string // where to write Out.crt and Out.key
	CN   string // the user name of a client certificate
	Orgs []string
	SANs []string // DNS names and IP addresses
	// At least one of the two.
	Server, Client bool
}

// EnsureCert writes the leaf pair of r unless the one there still matches
// r and was signed by r's CA; it reports whether it made a new one.
func EnsureCert(r Cert) (bool, error) {
	if r.CA == "" || r.Out == "" || r.CN == "" || (!r.Server && !r.Client) {
		return false, errors.New("a certificate needs a CA, a path, a common name and a use (server, client)")
	}
	caCert, caKey, err := LoadPair(r.CA)
	if err != nil {
		return false, fmt.Errorf("loading CA: %w", err)
	}
	var dnsNames []string
	var ips []net.IP
	for _, s := range r.SANs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, s)
		}
	}
	var usages []x509.ExtKeyUsage
	if r.Server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	subject := pkix.Name{CommonName: r.CN, Organization: r.Orgs}
	if cert, _, err := LoadPair(r.Out); err == nil && reusable(cert, caCert, subject, dnsNames, ips, usages) {
		return false, nil
	}
	key, err := newKey()
	if err != nil {
		return false, err
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
		return false, err
	}
	return true, writePair(r.Out, der, key)
}

// EnsureKeyPair writes out.key and out.pub unless both exist; it reports
// whether it made a new pair.
func EnsureKeyPair(out string) (bool, error) {
	if out == "" {
		return false, errors.New("a key pair needs a path")
	}
	if _, err := os.Stat(out + ".key"); err == nil {
		if _, err := os.Stat(out + ".pub"); err == nil {
			return false, nil
		}
	}
	key, err := newKey()
	if err != nil {
		return false, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return false, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return false, err
	}
	if err := WriteFile(out+".key", keyPEM, 0o600); err != nil {
		return false, err
	}
	return true, WriteFile(out+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
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
	if err := WriteFile(out+".key", keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFile(out+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o644)
}

// WriteFile replaces path atomically.
func WriteFile(path string, data []byte, mode os.FileMode) error {
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

// LoadPair reads the pair path.crt/path.key and checks that they belong
// together.
func LoadPair(path string) (*x509.Certificate, crypto.Signer, error) {
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

// Kubeconfig is a kubeconfig for user that reaches server with the client
// certificate certFile/keyFile, trusting caFile; it holds paths, no
// secrets.
func Kubeconfig(server, caFile, certFile, keyFile, user string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: jobset-local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: jobset-local
  context:
    cluster: jobset-local
    user: %s
current-context: jobset-local
`, server, caFile, user, certFile, keyFile, user))
}
