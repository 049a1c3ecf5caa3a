package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const elasticExample = "artifacts/examples/elastic-parallelism.yaml"

// grant binds a Role with the given rules to a user in ns and waits until
// kube-apiserver's and our server's authorization caches let the probe
// command through.
func grant(t *testing.T, ns, user, rules string, probe ...string) {
	t.Helper()
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ` + user + `}
rules:
` + rules + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ` + user + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ` + user + `}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: ` + user + `}
`
	if out, err := kubectlIn(role, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("creating the role of %s: %v\n%s", user, err, out)
	}
	eventually(t, time.Minute, user+" to be allowed "+strings.Join(probe, " "), func(ctx context.Context) (bool, error) {
		_, err := kubectlErr(append([]string{"--as=" + user, "-n", ns}, probe...)...)
		return err == nil, nil
	})
}

func wantForbidden(t *testing.T, what string, args ...string) {
	t.Helper()
	out, err := kubectlErr(args...)
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("%s: err=%v output=%s, want forbidden", what, err, out)
	}
}

// Permission on jobsets does not include jobsets/status: such a user cannot
// write status through the subresource, and status sent to the main
// resource is ignored.
func TestStatusNeedsItsOwnPermission(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+simpleExample)
	grant(t, ns, "carol", `- apiGroups: [jobset.x-k8s.io]
  resources: [jobsets]
  verbs: [get, list, watch, create, update, patch, delete]`, "get", "jobset", "simple")

	wantForbidden(t, "carol patching jobsets/status", "--as=carol", "-n", ns, "patch", "jobset", "simple",
		"--subresource=status", "--type=merge", "-p", `{"status":{"restarts":42}}`)
	// Through the main resource the write is accepted but the status is
	// the server's, not carol's.
	kubectl(t, "--as=carol", "-n", ns, "patch", "jobset", "simple", "--type=merge",
		"-p", `{"metadata":{"labels":{"by":"carol"}},"status":{"restarts":42}}`)
	if got := kubectl(t, "-n", ns, "get", "jobset", "simple", "-o", "jsonpath={.metadata.labels.by}/{.status.restarts}"); strings.HasSuffix(got, "/42") || !strings.HasPrefix(got, "carol/") {
		t.Errorf("after carol's patch of labels and status: %q; want the label set and the status left alone", got)
	}
}

// A user allowed only replicatedjobs/scale can scale, and nothing else: not
// read the JobSet, not edit its templates.
func TestScaleOnlyUser(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+elasticExample)
	grant(t, ns, "dave", `- apiGroups: [jobset.x-k8s.io]
  resources: [replicatedjobs/scale]
  verbs: [get, update, patch]`, "get", "--raw", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/"+ns+"/replicatedjobs/elastic.workers/scale")

	// kubectl scale would first read the ReplicatedJob itself; an
	// autoscaler, like this patch, only touches /scale.
	kubectl(t, "--as=dave", "-n", ns, "patch", "replicatedjob", "elastic.workers", "--subresource=scale",
		"--type=merge", "-p", `{"spec":{"replicas":3}}`)
	if got := kubectl(t, "-n", ns, "get", "jobset", "elastic", "-o", "jsonpath={.spec.replicatedJobs[0].template.spec.parallelism}"); got != "3" {
		t.Errorf("parallelism after dave's scale = %q, want 3", got)
	}
	wantForbidden(t, "dave reading the JobSet", "--as=dave", "-n", ns, "get", "jobset", "elastic")
	wantForbidden(t, "dave editing a template", "--as=dave", "-n", ns, "patch", "jobset", "elastic", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/replicatedJobs/0/template/spec/template/spec/containers/0/image","value":"evil"}]`)
	wantForbidden(t, "dave scaling through the JobSet", "--as=dave", "-n", ns, "patch", "jobset", "elastic", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/replicatedJobs/0/replicas","value":9}]`)
}

// Without credentials nothing but health answers, on kube-apiserver and on
// jobset-apiserver's own port: 401 or 403, and no JobSet in the body.
// (/version is public on both, as kube-apiserver's default RBAC makes it.)
func TestAnonymousGetsOnlyHealth(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+simpleExample)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		// Loopback test servers; the point is the missing credentials.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	api := "/apis/jobset.x-k8s.io/v1alpha2"
	for _, base := range []string{
		strings.TrimSuffix(cluster.config.Host, "/"),
		"https://127.0.0.1:" + stackEnv(t, "JOBSET_APISERVER_PORT"),
	} {
		for _, req := range []struct{ method, path string }{
			{"GET", api + "/jobsets"},
			{"GET", api + "/namespaces/" + ns + "/jobsets/simple"},
			{"GET", api + "/namespaces/" + ns + "/jobsets/simple/status"},
			{"GET", api + "/namespaces/" + ns + "/replicatedjobs"},
			{"GET", api + "/namespaces/" + ns + "/replicatedjobs/simple.workers/scale"},
			{"POST", api + "/namespaces/" + ns + "/jobsets"},
			{"DELETE", api + "/namespaces/" + ns + "/jobsets/simple"},
			{"GET", api + "/namespaces/" + ns + "/jobsets?watch=true"},
			{"GET", api},
			{"GET", "/metrics"},
			{"GET", "/openapi/v2"},
		} {
			code, body := anonymous(t, hc, req.method, base+req.path)
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("anonymous %s %s%s: %d, want 401 or 403", req.method, base, req.path, code)
			}
			if strings.Contains(body, `"kind":"JobSet`) || strings.Contains(body, `"spec"`) {
				t.Errorf("anonymous %s %s%s returned JobSet data: %s", req.method, base, req.path, body)
			}
		}
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			if code, body := anonymous(t, hc, "GET", base+path); code != http.StatusOK {
				t.Errorf("anonymous GET %s%s: %d %s, want 200", base, path, code, body)
			}
		}
	}
	if _, err := kubectlErr("-n", ns, "get", "jobset", "simple"); err != nil {
		t.Errorf("the anonymous DELETE removed the JobSet")
	}
}

func anonymous(t *testing.T, hc *http.Client, method, url string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"anon"}}`)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(data)
}

// kube-apiserver's audit log records every JobSet write with the user who
// made it (hack/local/audit-policy.yaml).
func TestAuditRecordsJobSetWrites(t *testing.T) {
	ns := namespace(t)
	grant(t, ns, "erin", `- apiGroups: [jobset.x-k8s.io]
  resources: [jobsets]
  verbs: [get, list, create, patch, delete]`, "get", "jobsets")
	kubectl(t, "--as=erin", "-n", ns, "apply", "-f", cluster.root+"/"+simpleExample)
	kubectl(t, "--as=erin", "-n", ns, "patch", "jobset", "simple", "--type=merge", "-p", `{"metadata":{"labels":{"audited":"yes"}}}`)
	kubectl(t, "--as=erin", "-n", ns, "delete", "jobset", "simple", "--wait=false")

	logFile := filepath.Join(cluster.localDir, "logs", "kube-apiserver-audit.log")
	want := map[string]bool{"create": false, "patch": false, "delete": false}
	eventually(t, time.Minute, "audit events for erin's create, patch and delete", func(ctx context.Context) (bool, error) {
		f, err := os.Open(logFile)
		if err != nil {
			return false, nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev struct {
				Stage            string `json:"stage"`
				Verb             string `json:"verb"`
				User             struct{ Username string }
				ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
				ObjectRef        struct {
					Resource, Namespace, Name, APIGroup string
				} `json:"objectRef"`
				ResponseStatus struct{ Code int } `json:"responseStatus"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
				continue
			}
			if ev.ObjectRef.Resource == "jobsets" && ev.ObjectRef.APIGroup == "jobset.x-k8s.io" && ev.ObjectRef.Namespace == ns &&
				ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == "erin" && ev.User.Username != "" &&
				ev.ResponseStatus.Code/100 == 2 {
				if _, ok := want[ev.Verb]; ok {
					want[ev.Verb] = true
				}
			}
		}
		return want["create"] && want["patch"] && want["delete"], nil
	})
}
