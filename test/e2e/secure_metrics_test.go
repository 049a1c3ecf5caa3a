package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// serviceAccountToken creates a ServiceAccount and returns a token of it
// (TokenRequest).
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := cluster.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cluster.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grantMetricsReader binds a ClusterRole allowing get on /metrics to a
// ServiceAccount, for the duration of the test.
func grantMetricsReader(t *testing.T, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	name := "metrics-reader-" + ns
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if _, err := cluster.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cluster.kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// The HTTPS endpoint authenticates with the cluster's tokens and
// authorizes get on /metrics through the cluster's RBAC.
func TestSecureControllerMetrics(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	url := "https://127.0.0.1:" + stackEnv(t, "JOBSET_CONTROLLER_SECURE_METRICS_PORT") + "/metrics"
	// The serving certificate is signed by the stack's CA: trust that CA.
	caPEM, err := os.ReadFile(filepath.Join(cluster.localDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate in ca.crt")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}

	allowed := serviceAccountToken(t, ns, "scraper")
	denied := serviceAccountToken(t, ns, "nobody")
	grantMetricsReader(t, ns, "scraper")

	eventually(t, time.Minute, "the granted ServiceAccount to scrape /metrics", func(context.Context) (bool, error) {
		body, err := scrapeWith(client, url, allowed)
		return err == nil && strings.Contains(body, "jobset_reconcile_duration_seconds_count"), nil
	})
	if _, err := scrapeWith(client, url, denied); !isStatus(err, http.StatusForbidden) {
		t.Errorf("a ServiceAccount without the grant: %v, want status 403", err)
	}
	if _, err := scrapeWith(client, url, ""); !isStatus(err, http.StatusUnauthorized) {
		t.Errorf("no credentials: %v, want status 401", err)
	}
	if _, err := scrapeWith(client, url, "not-a-token"); !isStatus(err, http.StatusUnauthorized) {
		t.Errorf("a bad token: %v, want status 401", err)
	}
}

func isStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == code
}
