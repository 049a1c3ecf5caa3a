package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	stdbase64 "encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Admission policies configured in kube-apiserver apply to JobSets: our
// server runs the ValidatingAdmissionPolicy plugin against its own objects.
func TestValidatingAdmissionPolicyAppliesToJobSets(t *testing.T) {
	ns := namespace(t)
	name := "deny-forbidden-" + ns
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["jobset.x-k8s.io"]
      apiVersions: ["v1alpha2"]
      operations: ["CREATE"]
      resources: ["jobsets"]
  validations:
  - expression: "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)"
    message: "JobSets labelled forbidden are not allowed here"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %[2]s
`, name, ns)
	if out, err := kubectlIn(policy, "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the policy: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name, "--ignore-not-found")
	})

	js := simpleJobSet(ns, "")
	js.Labels = map[string]string{"forbidden": "true"}
	// The server learns about the policy through an informer.
	eventually(t, 2*time.Minute, "the policy to deny a labelled JobSet", func(ctx context.Context) (bool, error) {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, js.DeepCopy(), metav1.CreateOptions{})
		if err == nil {
			_ = cluster.jobsets.JobsetV1alpha2().JobSets(ns).Delete(ctx, js.Name, metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(err.Error(), "JobSets labelled forbidden are not allowed here"), nil
	})
	allowed := simpleJobSet(ns, "allowed")
	if _, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(context.Background(), allowed, metav1.CreateOptions{}); err != nil {
		t.Errorf("a JobSet without the label was refused: %v", err)
	}
}

// A mutating webhook registered in kube-apiserver is called by our server
// for JobSets, its Service resolved from the Service object (here an
// ExternalName pointing at this machine), with TLS verified against the
// configuration's caBundle.
func TestMutatingWebhookIsCalledForJobSets(t *testing.T) {
	ns := namespace(t)
	svcName := "jobset-e2e-webhook"
	caPEM, serverCert := webhookCertificates(t, svcName+"."+ns+".svc")

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	calls := make(chan string, 16)
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { labelJobSet(t, w, r, calls) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = srv.ServeTLS(listener, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	config := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - port: %[3]d
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: %[1]s-%[2]s
webhooks:
- name: label.jobset-e2e.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  clientConfig:
    caBundle: %[4]s
    service:
      namespace: %[2]s
      name: %[1]s
      port: %[3]d
      path: /mutate
  rules:
  - apiGroups: ["jobset.x-k8s.io"]
    apiVersions: ["v1alpha2"]
    operations: ["CREATE"]
    resources: ["jobsets"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %[2]s
`, svcName, ns, port, caPEM)
	if out, err := kubectlIn(config, "apply", "-f", "-"); err != nil {
		t.Fatalf("registering the webhook: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "mutatingwebhookconfiguration", svcName+"-"+ns, "--ignore-not-found")
	})

	// The server picks the configuration up through an informer; until then
	// JobSets are created unlabelled, and are deleted again.
	var attempt int
	eventually(t, 2*time.Minute, "the webhook to label a new JobSet", func(ctx context.Context) (bool, error) {
		attempt++
		js := simpleJobSet(ns, fmt.Sprintf("hooked-%d", attempt))
		created, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{})
		if err != nil {
			return false, nil
		}
		if created.Labels["mutated-by"] == "e2e-webhook" {
			return true, nil
		}
		_ = cluster.jobsets.JobsetV1alpha2().JobSets(ns).Delete(ctx, js.Name, metav1.DeleteOptions{})
		return false, nil
	})
	select {
	case kind := <-calls:
		if kind != "JobSet" {
			t.Errorf("webhook saw kind %q, want JobSet", kind)
		}
	default:
		t.Error("the webhook recorded no call")
	}
}

func simpleJobSet(ns, name string) *v1alpha2.JobSet {
	if name == "" {
		name = "simple"
	}
	return &v1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.JobSetSpec{
			Suspend:        boolPtr(true),
			ReplicatedJobs: []v1alpha2.ReplicatedJob{replicatedJob("workers", 1, 1, "")},
		},
	}
}

func boolPtr(b bool) *bool { return &b }

// labelJobSet answers an AdmissionReview with a patch adding a label.
func labelJobSet(t *testing.T, w http.ResponseWriter, r *http.Request, calls chan<- string) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	select {
	case calls <- review.Request.Kind.Kind:
	default:
	}
	patch := `[{"op":"add","path":"/metadata/labels","value":{"mutated-by":"e2e-webhook"}}]`
	pt := admissionv1.PatchTypeJSONPatch
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, Patch: []byte(patch), PatchType: &pt}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&review); err != nil {
		t.Errorf("answering the review: %v", err)
	}
}

// webhookCertificates makes a CA and a serving certificate for the given
// DNS name, valid for an hour. It returns the CA in base64-encoded PEM, as a
// caBundle is written in YAML.
func webhookCertificates(t *testing.T, dnsName string) (string, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jobset-e2e-webhook-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		DNSNames:  []string{dnsName, "localhost"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTemplate, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return base64(caPEM), cert
}

func base64(b []byte) string { return stdbase64.StdEncoding.EncodeToString(b) }
