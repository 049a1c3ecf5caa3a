package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// tokenReviewer and accessReviewer are the parts of client-go's typed
// clients the endpoint uses.
type tokenReviewer interface {
	Create(context.Context, *authenticationv1.TokenReview, metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

type accessReviewer interface {
	Create(context.Context, *authorizationv1.SubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// metricsAuth authenticates and authorizes scrapes, caching the answers of
// the API server for ttl (errors are not cached).
type metricsAuth struct {
	tokens tokenReviewer
	access accessReviewer
	ttl    time.Duration
	now    func() time.Time

	mu       sync.Mutex
	users    map[[32]byte]cachedUser
	allowed  map[string]cachedAnswer
	maxCache int
}

type cachedUser struct {
	user    *authenticationv1.UserInfo // nil: the token is not valid
	expires time.Time
}

type cachedAnswer struct {
	allowed bool
	expires time.Time
}

func newMetricsAuth(tokens tokenReviewer, access accessReviewer, ttl time.Duration) *metricsAuth {
	return &metricsAuth{
		tokens: tokens, access: access, ttl: ttl, now: time.Now,
		users: map[[32]byte]cachedUser{}, allowed: map[string]cachedAnswer{}, maxCache: 1024,
	}
}

// maxTokenBytes bounds the bearer tokens sent to TokenReview. A
// service-account token (an RS256 JWT with pod and node bindings) is 1–2 KiB
// and OIDC ID tokens with long group lists stay within a few KiB; anything
// larger is refused without costing the API server a review. It is half of
// httpserver.MaxHeaderBytes, so such a token always reaches this check.
const maxTokenBytes = 8 << 10

// wrap serves h to callers that are authenticated (else 401) and allowed
// the request's verb on its path (else 403).
func (a *metricsAuth) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb, ok := nonResourceVerb(r.Method)
		if !ok {
			// No verb to review: refuse before any review is spent.
			w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		u, err := a.authenticate(r)
		if err != nil {
			klog.ErrorS(err, "Reviewing a metrics scraper's token")
			http.Error(w, "authentication failed", http.StatusInternalServerError)
			return
		}
		if u == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		ok, err = a.authorize(r.Context(), u, verb, r.URL.Path)
		if err != nil {
			klog.ErrorS(err, "Authorizing a metrics scraper", "user", u.Username)
			http.Error(w, "authorization failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			http.Error(w, "Forbidden: "+u.Username+" may not "+verb+" "+r.URL.Path, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// nonResourceVerb is the Kubernetes verb of a request to a non-resource
// URL, as kube-apiserver names it; false for methods without one.
func nonResourceVerb(method string) (string, bool) {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get", true
	case http.MethodPost:
		return "create", true
	case http.MethodPut:
		return "update", true
	case http.MethodPatch:
		return "patch", true
	case http.MethodDelete:
		return "delete", true
	}
	return "", false
}

// authenticate returns the caller, nil when it has no valid credentials.
// A verified client certificate wins over a token.
func (a *metricsAuth) authenticate(r *http.Request) (*authenticationv1.UserInfo, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf := r.TLS.VerifiedChains[0][0]
		if leaf.Subject.CommonName != "" {
			return &authenticationv1.UserInfo{Username: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}, nil
		}
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, nil
	}
	if len(token) > maxTokenBytes {
		klog.V(2).InfoS("Refusing an oversized bearer token on the metrics endpoint", "bytes", len(token), "limit", maxTokenBytes)
		return nil, nil
	}
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	c, hit := a.users[key]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.user, nil
	}
	tr, err := a.tokens.Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var u *authenticationv1.UserInfo
	if tr.Status.Authenticated && tr.Status.User.Username != "" {
		u = tr.Status.User.DeepCopy()
	}
	a.mu.Lock()
	a.users[key] = cachedUser{user: u, expires: now.Add(a.ttl)}
	a.pruneLocked(now)
	a.mu.Unlock()
	return u, nil
}

func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authorize asks whether u may do verb on the non-resource URL path.
func (a *metricsAuth) authorize(ctx context.Context, u *authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := accessKey(u, verb, path)
	now := a.now()
	a.mu.Lock()
	c, hit := a.allowed[key]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.allowed, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.allowed[key] = cachedAnswer{allowed: sar.Status.Allowed, expires: now.Add(a.ttl)}
	a.pruneLocked(now)
	a.mu.Unlock()
	return sar.Status.Allowed, nil
}

// accessKey identifies a request's verb and path and the user with all its
// attributes. Every string is length-prefixed and every list counted, so
// two different requests never share a key whatever bytes their names hold
// (a separator byte could be part of a group name).
func accessKey(u *authenticationv1.UserInfo, verb, path string) string {
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	list := func(l []string) {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	str(verb)
	str(path)
	str(u.Username)
	str(u.UID)
	// Groups are a set: their order does not change the answer.
	groups := append([]string(nil), u.Groups...)
	sort.Strings(groups)
	list(groups)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		str(k)
		list(u.Extra[k])
	}
	return string(b)
}

// pruneLocked keeps the caches small: expired entries go when a cache is
// full, and everything goes if that is not enough.
func (a *metricsAuth) pruneLocked(now time.Time) {
	a.users = pruned(a.users, a.maxCache, now, func(c cachedUser) time.Time { return c.expires })
	a.allowed = pruned(a.allowed, a.maxCache, now, func(c cachedAnswer) time.Time { return c.expires })
}

// pruned is m without its expired entries once it holds over limit, and
// empty if it still does.
func pruned[K comparable, V any](m map[K]V, limit int, now time.Time, expires func(V) time.Time) map[K]V {
	if len(m) <= limit {
		return m
	}
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
	if len(m) > limit {
		return map[K]V{}
	}
	return m
}

// certReloader serves a certificate from files, loading them again when
// either file's modification time changes (certificate rotation).
type certReloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certTime time.Time
	keyTime  time.Time
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	ci, errC := os.Stat(r.certFile)
	ki, errK := os.Stat(r.keyFile)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && (errC != nil || errK != nil || (ci.ModTime().Equal(r.certTime) && ki.ModTime().Equal(r.keyTime))) {
		return r.cert, nil // unchanged, or a rotation in progress
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			klog.ErrorS(err, "Reloading the metrics serving certificate; keeping the previous one")
			return r.cert, nil
		}
		return nil, err
	}
	r.cert = &cert
	if errC == nil && errK == nil {
		r.certTime, r.keyTime = ci.ModTime(), ki.ModTime()
	}
	return r.cert, nil
}
