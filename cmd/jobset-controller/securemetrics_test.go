package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// fakeReviews answers token reviews from a table of tokens and access
// reviews from a set of allowed users, counting the calls.
type fakeReviews struct {
	mu      sync.Mutex
	tokens  map[string]string // token -> user
	allowed map[string]bool
	fail    bool
	tokenN  int
	accessN int
	lastSAR authorizationv1.SubjectAccessReviewSpec
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
	a := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}}, "/metrics")
	b := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"b", "a"}}, "/metrics")
	c := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a"}}, "/metrics")
	d := accessKey(&authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}}, "/metrics")
	if a != b {
		t.Error("group order changed the key")
	}
	if a == c || a == d {
		t.Error("different groups or extra gave the same key")
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
	o.clientCAFile = "/nonexistent"
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
