package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nativejobset/jobset/pkg/httpserver"
)

// fakeReviews answers token reviews from a table of tokens and access
// reviews from a set of allowed users, counting the calls.
type fakeReviews struct {
	mu      sync.Mutex
	tokens  map[string]string // token -> user
	allowed map[string]bool
	fail    bool
	// allowedGroups and allowedVerbs, when set, also decide: a user is
	// allowed when it or one of its groups is, and only for these verbs.
	allowedGroups map[string]bool
	allowedVerbs  map[string]bool
	tokenN        int
	accessN       int
	lastSAR       authorizationv1.SubjectAccessReviewSpec
}

// reviewCounts reads the counters under the lock, for tests whose reviews
// run in the server's goroutines.
func (f *fakeReviews) reviewCounts() (tokens, access int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenN, f.accessN
}

type fakeTokens struct{ *fakeReviews }
type fakeAccess struct{ *fakeReviews }

func (f fakeTokens) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenN++
	if f.fail {
		return nil, errors.New("api server unavailable")
	}
	out := tr.DeepCopy()
	if u, ok := f.tokens[tr.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u, Groups: []string{"g2", "g1"}}}
	}
	return out, nil
}

func (f fakeAccess) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accessN++
	f.lastSAR = sar.Spec
	out := sar.DeepCopy()
	out.Status.Allowed = f.allowed[sar.Spec.User]
	for _, g := range sar.Spec.Groups {
		out.Status.Allowed = out.Status.Allowed || f.allowedGroups[g]
	}
	if f.allowedVerbs != nil && sar.Spec.NonResourceAttributes != nil && !f.allowedVerbs[sar.Spec.NonResourceAttributes.Verb] {
		out.Status.Allowed = false
	}
	return out, nil
}

func TestMetricsAuth(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"good": "scraper", "other": "nobody"}, allowed: map[string]bool{"scraper": true}}
	a := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, 10*time.Second)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	h := a.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	get := func(auth string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Basic Zm9vOmJhcg==", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer not-a-token", http.StatusUnauthorized},
		{"Bearer other", http.StatusForbidden},
		{"Bearer good", http.StatusOK},
	} {
		if w := get(tc.auth); w.Code != tc.want {
			t.Errorf("%q: status %d, want %d (%s)", tc.auth, w.Code, tc.want, w.Body)
		}
	}
	if f.lastSAR.NonResourceAttributes == nil || f.lastSAR.NonResourceAttributes.Path != "/metrics" || f.lastSAR.NonResourceAttributes.Verb != "get" || f.lastSAR.User != "scraper" {
		t.Errorf("access review = %+v", f.lastSAR)
	}
	tokens, access := f.tokenN, f.accessN

	// Methods without a Kubernetes verb are refused before any review.
	r := httptest.NewRequest(http.MethodOptions, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer good")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || f.tokenN != tokens || f.accessN != access {
		t.Errorf("OPTIONS: status %d, reviews tokens %d→%d, access %d→%d", w.Code, tokens, f.tokenN, access, f.accessN)
	}

	// Cached: no more reviews within the TTL.
	if w := get("Bearer good"); w.Code != http.StatusOK || w.Body.String() != "metrics" {
		t.Fatalf("cached: %d %s", w.Code, w.Body)
	}
	if w := get("Bearer not-a-token"); w.Code != http.StatusUnauthorized {
		t.Fatalf("cached invalid token: %d", w.Code)
	}
	if f.tokenN != tokens || f.accessN != access {
		t.Errorf("reviews within the TTL: tokens %d→%d, access %d→%d", tokens, f.tokenN, access, f.accessN)
	}

	// Expired: reviewed again, and a revoked grant takes effect.
	now = now.Add(11 * time.Second)
	f.allowed["scraper"] = false
	if w := get("Bearer good"); w.Code != http.StatusForbidden {
		t.Errorf("after expiry with the grant revoked: %d", w.Code)
	}
	if f.tokenN != tokens+1 || f.accessN != access+1 {
		t.Errorf("reviews after expiry: tokens %d→%d, access %d→%d", tokens, f.tokenN, access, f.accessN)
	}

	// Review failures are a 500 and are not cached.
	now = now.Add(11 * time.Second)
	f.fail = true
	if w := get("Bearer good"); w.Code != http.StatusInternalServerError {
		t.Errorf("failing review: %d", w.Code)
	}
	f.fail = false
	f.allowed["scraper"] = true
	if w := get("Bearer good"); w.Code != http.StatusOK {
		t.Errorf("after the failure: %d", w.Code)
	}
}

func TestMetricsAuthCacheBounded(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{}, allowed: map[string]bool{}}
	a := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute)
	a.maxCache = 8
	for i := 0; i < 100; i++ {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer t"+strings.Repeat("x", i))
		if _, err := a.authenticate(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.users) > a.maxCache+1 {
		t.Errorf("token cache holds %d entries, bound %d", len(a.users), a.maxCache)
	}
}

func TestAccessKeyDistinguishesUsers(t *testing.T) {
	a := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}}, "get", "/metrics")
	b := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"b", "a"}}, "get", "/metrics")
	c := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a"}}, "get", "/metrics")
	d := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}}, "get", "/metrics")
	e := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}}, "create", "/metrics")
	if a != b {
		t.Error("group order changed the key")
	}
	if a == c || a == d || a == e {
		t.Error("different groups, extra or verb gave the same key")
	}
	// Users that differ only in where their strings split.
	type U = authenticationv1.UserInfo
	type X = map[string]authenticationv1.ExtraValue
	for _, tc := range []struct {
		name string
		x, y string
	}{
		{"groups", accessKey(&U{Username: "u", Groups: []string{"a", "b"}}, "get", "/metrics"),
			accessKey(&U{Username: "u", Groups: []string{"a\x01b"}}, "get", "/metrics")},
		{"user and uid", accessKey(&U{Username: "u\x00", UID: "x"}, "get", "/metrics"),
			accessKey(&U{Username: "u", UID: "\x00x"}, "get", "/metrics")},
		{"extra values", accessKey(&U{Username: "u", Extra: X{"k": {"a", "b"}}}, "get", "/metrics"),
			accessKey(&U{Username: "u", Extra: X{"k": {"a\x01b"}}}, "get", "/metrics")},
		{"extra keys", accessKey(&U{Username: "u", Extra: X{"k=v": {"w"}}}, "get", "/metrics"),
			accessKey(&U{Username: "u", Extra: X{"k": {"v=w"}}}, "get", "/metrics")},
		{"verb and path", accessKey(&U{Username: "u"}, "get", "/metrics"),
			accessKey(&U{Username: "u"}, "ge", "t/metrics")},
	} {
		if tc.x == tc.y {
			t.Errorf("%s: two users share the key %q", tc.name, tc.x)
		}
	}
}

// A user allowed /metrics does not make the answer cached for it serve a
// user whose groups only split differently.
func TestMetricsAuthCacheSplitGroups(t *testing.T) {
	f := &fakeReviews{allowed: map[string]bool{}}
	a := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute)
	f.allowedGroups = map[string]bool{"a": true}
	ok, err := a.authorize(context.Background(), &authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}}, "get", "/metrics")
	if err != nil || !ok {
		t.Fatalf("groups [a b]: allowed %v, err %v", ok, err)
	}
	ok, err = a.authorize(context.Background(), &authenticationv1.UserInfo{Username: "u", Groups: []string{"a\x01b"}}, "get", "/metrics")
	if err != nil || ok {
		t.Errorf("groups [a\\x01b]: allowed %v, err %v; want a review of its own that denies", ok, err)
	}
	if f.accessN != 2 {
		t.Errorf("%d access reviews, want 2", f.accessN)
	}
}

// Each HTTP method is reviewed with its Kubernetes verb.
func TestMetricsAuthVerb(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"good": "scraper"}, allowed: map[string]bool{"scraper": true}}
	// serve sends one request with a cache of its own, so it is reviewed.
	serve := func(method string) *httptest.ResponseRecorder {
		f.lastSAR = authorizationv1.SubjectAccessReviewSpec{}
		h := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute).wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest(method, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer good")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for method, verb := range map[string]string{
		http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create",
		http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
	} {
		if w := serve(method); w.Code != http.StatusOK {
			t.Errorf("%s: status %d", method, w.Code)
		}
		if f.lastSAR.NonResourceAttributes == nil || f.lastSAR.NonResourceAttributes.Verb != verb {
			t.Errorf("%s: reviewed as %+v, want verb %q", method, f.lastSAR.NonResourceAttributes, verb)
		}
	}
	// Only get is allowed now: a POST by the same user is forbidden.
	f.allowedVerbs = map[string]bool{"get": true}
	if w := serve(http.MethodPost); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "may not create /metrics") {
		t.Errorf("POST with get only: %d %s", w.Code, w.Body)
	}

	// A get answer in the cache does not answer a POST: verbs are part of
	// the key.
	f.allowedVerbs = nil
	f.allowed["scraper"] = true
	h := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute).wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := httptest.NewRequest(method, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer good")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if f.lastSAR.NonResourceAttributes == nil || f.lastSAR.NonResourceAttributes.Verb != "create" {
		t.Errorf("POST after a cached GET: last review %+v, want verb create", f.lastSAR.NonResourceAttributes)
	}
}

// Tokens over maxTokenBytes are refused without a TokenReview.
func TestMetricsAuthTokenSize(t *testing.T) {
	longest := strings.Repeat("t", maxTokenBytes)
	f := &fakeReviews{tokens: map[string]string{longest: "scraper", longest + "t": "scraper"}, allowed: map[string]bool{"scraper": true}}
	a := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute)
	h := a.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	get := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := get(longest + "t"); code != http.StatusUnauthorized || f.tokenN != 0 {
		t.Errorf("token of %d bytes: status %d after %d token reviews, want 401 after none", maxTokenBytes+1, code, f.tokenN)
	}
	if code := get(longest); code != http.StatusOK || f.tokenN != 1 {
		t.Errorf("token of %d bytes: status %d after %d token reviews, want 200 after one", maxTokenBytes, code, f.tokenN)
	}
}

// The endpoint serves TLS with the self-signed certificate and applies the
// review before the handler.
func TestSecureMetricsServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := newSecureMetricsOptions()
	o.bindAddress = "127.0.0.1:0"
	o.certDir = t.TempDir()
	ca := newTestCA(t, "ca")
	o.clientCAFile = writeCAFile(t, ca)
	// A client configuration that reaches nothing: no request is made
	// without credentials.
	addr, err := serveSecureMetrics(ctx, o, &rest.Config{Host: "https://127.0.0.1:1"}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
	resp, err := client.Get("https://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no credentials: %d", resp.StatusCode)
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || resp.TLS.PeerCertificates[0].Subject.CommonName == "" {
		t.Error("no serving certificate")
	}
	// The self-signed pair is kept in the directory and reused.
	c1, k1, err := selfSigned(o.certDir)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2, _ := selfSigned(o.certDir)
	if string(c1) != string(c2) || string(k1) != string(k2) {
		t.Error("the certificate in --metrics-cert-dir was not reused")
	}
}

func TestSecureMetricsFlags(t *testing.T) {
	o := defaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--secure-metrics-bind-address=127.0.0.1:8443", "--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key",
		"--tls-min-version=VersionTLS13", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "--metrics-auth-cache-ttl=30s"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.secureMetrics.cacheTTL != 30*time.Second {
		t.Errorf("cache TTL = %v", o.secureMetrics.cacheTTL)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--secure-metrics-bind-address=localhost:8443"}, "not an IP address"},
		{[]string{"--secure-metrics-bind-address=127.0.0.1"}, "--secure-metrics-bind-address"},
		{[]string{"--secure-metrics-bind-address=127.0.0.1:99999"}, "invalid port"},
		{[]string{"--secure-metrics-bind-address=:8443", "--tls-cert-file=/c.crt"}, "go together"},
		{[]string{"--secure-metrics-bind-address=:8443", "--tls-min-version=VersionTLS9"}, "--tls-min-version"},
		{[]string{"--secure-metrics-bind-address=:8443", "--tls-cipher-suites=NOPE"}, "unknown cipher suite"},
		{[]string{"--secure-metrics-bind-address=:8443", "--metrics-auth-cache-ttl=-1s"}, "--metrics-auth-cache-ttl"},
	} {
		o := defaultOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	// Off by default.
	if d := defaultOptions(); d.secureMetrics.bindAddress != "" {
		t.Errorf("secure metrics on by default at %q", d.secureMetrics.bindAddress)
	}
}

// A --client-ca-file that cannot be read stops the start with an error
// naming the flag, rather than silently refusing client certificates.
func TestSecureMetricsBadClientCA(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	empty := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(t.TempDir(), "missing.crt"), empty, garbage} {
		o := newSecureMetricsOptions()
		o.bindAddress = "127.0.0.1:0"
		o.clientCAFile = file
		if _, err := serveSecureMetrics(ctx, o, &rest.Config{Host: "https://127.0.0.1:1"}, http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "--client-ca-file") {
			t.Errorf("%s: err = %v, want one naming --client-ca-file", file, err)
		}
	}
}

// The server has every limit set, and the token limit fits in the header
// limit (else an oversized token would never reach the token check).
func TestSecureMetricsServerLimits(t *testing.T) {
	srv := secureMetricsServer(http.NotFoundHandler(), &tls.Config{})
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout < srv.ReadHeaderTimeout || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("timeouts: read header %v, read %v, write %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	if srv.MaxHeaderBytes != 16<<10 {
		t.Errorf("MaxHeaderBytes = %d, want 16 KiB", srv.MaxHeaderBytes)
	}
	if maxTokenBytes >= srv.MaxHeaderBytes {
		t.Errorf("maxTokenBytes %d is not below MaxHeaderBytes %d", maxTokenBytes, srv.MaxHeaderBytes)
	}
}

// startTestSecureMetrics serves "metrics" behind f's reviews with a
// self-signed certificate, and client certificates of clientCA if set.
func startTestSecureMetrics(t *testing.T, f *fakeReviews, clientCA func() *x509.CertPool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := newSecureMetricsOptions()
	o.bindAddress = "127.0.0.1:0"
	auth := newMetricsAuth(fakeTokens{f}, fakeAccess{f}, time.Minute)
	addr, err := listenSecureMetrics(ctx, o, auth, clientCA, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + addr.String() + "/metrics"
}

// scrape GETs url on a new connection, presenting cert if it is not nil.
func scrape(url string, cert *tls.Certificate, header http.Header) (int, error) {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // self-signed test certificate
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Headers over the limit are refused by the server before the handler,
// so their token is never reviewed.
func TestSecureMetricsHeaderLimit(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"good": "scraper"}, allowed: map[string]bool{"scraper": true}}
	url := startTestSecureMetrics(t, f, nil)
	big := http.Header{"Authorization": {"Bearer good"}, "X-Padding": {strings.Repeat("p", 2*httpserver.MaxHeaderBytes)}}
	code, err := scrape(url, nil, big)
	if err != nil || code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("%d KiB of headers: status %d, err %v; want 431", 2*httpserver.MaxHeaderBytes>>10, code, err)
	}
	if n, _ := f.reviewCounts(); n != 0 {
		t.Errorf("%d token reviews for a refused request", n)
	}
	// Below the limit the same request is served.
	small := http.Header{"Authorization": {"Bearer good"}, "X-Padding": {strings.Repeat("p", httpserver.MaxHeaderBytes/2)}}
	if code, err := scrape(url, nil, small); err != nil || code != http.StatusOK {
		t.Errorf("%d KiB of headers: status %d, err %v; want 200", httpserver.MaxHeaderBytes/2>>10, code, err)
	}
}

// Replacing --client-ca-file takes effect without a restart: certificates
// of the new CA are accepted, those of the old one no longer are.
func TestSecureMetricsClientCAReload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	oldCert, newCert := oldCA.clientCert(t, "scraper"), newCA.clientCert(t, "scraper")
	file := writeCAFile(t, oldCA)
	clientCA, err := clientCAs(ctx, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReviews{allowed: map[string]bool{"scraper": true}}
	url := startTestSecureMetrics(t, f, clientCA)

	if code, err := scrape(url, &oldCert, nil); err != nil || code != http.StatusOK {
		t.Fatalf("certificate of the first CA: status %d, err %v", code, err)
	}
	if code, err := scrape(url, &newCert, nil); err == nil && code == http.StatusOK {
		t.Fatal("certificate of a CA not yet in the file was accepted")
	}

	// Replace the file the way a mounted Secret changes: a rename.
	tmp := file + ".new"
	if err := os.WriteFile(tmp, newCA.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, err := scrape(url, &newCert, nil)
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("certificate of the new CA not accepted after the file changed: %v", err)
	}
	if code, err := scrape(url, &oldCert, nil); err == nil && code == http.StatusOK {
		t.Error("certificate of the replaced CA still accepted")
	}
	if n, _ := f.reviewCounts(); n != 0 {
		t.Errorf("%d token reviews for certificate callers", n)
	}
}

// testCA is a self-signed CA that signs client certificates.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, key := issueTestCert(t, tmpl, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// clientCert is a client certificate of ca for user.
func (ca *testCA) clientCert(t *testing.T, user string) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, key := issueTestCert(t, tmpl, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// issueTestCert signs tmpl, valid for an hour either side of now, with a
// new key by parent, or by itself when parent is nil.
func issueTestCert(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func writeCAFile(t *testing.T, ca *testCA) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(file, ca.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Without --client-ca-file the client CA comes from the ConfigMap
// kube-system/extension-apiserver-authentication and follows its changes:
// a CA that appears later, then a rotated one, take effect without a
// restart, and the replaced CA's certificates are refused.
func TestSecureMetricsClusterClientCAReload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	oldCert, newCert := oldCA.clientCert(t, "scraper"), newCA.clientCert(t, "scraper")
	kube := fake.NewClientset()
	clientCA, err := clientCAs(ctx, "", kube)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReviews{allowed: map[string]bool{"scraper": true}}
	url := startTestSecureMetrics(t, f, clientCA)
	accepted := func(cert *tls.Certificate) bool {
		code, err := scrape(url, cert, nil)
		return err == nil && code == http.StatusOK
	}
	waitAccepted := func(what string, cert *tls.Certificate) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return accepted(cert), nil
		})
		if err != nil {
			t.Fatalf("%s not accepted: %v", what, err)
		}
	}

	// No ConfigMap yet: no certificate authenticates.
	if accepted(&oldCert) {
		t.Fatal("a client certificate was accepted without any client CA")
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data:       map[string]string{"client-ca-file": string(oldCA.certPEM)},
	}
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAccepted("certificate of the CA published after the start", &oldCert)
	if accepted(&newCert) {
		t.Fatal("certificate of a CA not in the ConfigMap was accepted")
	}

	cm.Data["client-ca-file"] = string(newCA.certPEM)
	if _, err := kube.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAccepted("certificate of the rotated CA", &newCert)
	if accepted(&oldCert) {
		t.Error("certificate of the replaced CA still accepted")
	}

	if n, _ := f.reviewCounts(); n != 0 {
		t.Errorf("%d token reviews for certificate callers", n)
	}
}
