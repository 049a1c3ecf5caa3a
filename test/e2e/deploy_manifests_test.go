package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The deployment overlays build with kustomize, and every object they make
// passes the real API server's strict validation (a server-side dry run, so
// nothing is changed; only their namespace is created when missing).
func TestDeployManifestsValidate(t *testing.T) {
	t.Parallel()
	overlays, err := filepath.Glob(filepath.Join(cluster.root, "artifacts", "deploy", "overlays", "*"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no overlays found: %v", err)
	}
	built := map[string]string{}
	namespaces := map[string]bool{}
	for _, dir := range overlays {
		out := kubectl(t, "kustomize", dir)
		built[filepath.Base(dir)] = out
		for _, ns := range namespacesIn(t, out) {
			namespaces[ns] = true
		}
	}
	if len(namespaces) == 0 {
		t.Fatal("the overlays define no namespace")
	}
	for ns := range namespaces {
		if _, err := kubectlErr("get", "namespace", ns); err == nil {
			continue // the local cluster has it already
		}
		kubectl(t, "create", "namespace", ns)
		t.Cleanup(func() { _, _ = kubectlErr("delete", "namespace", ns, "--wait=false") })
	}
	for name, out := range built {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []string{"Deployment", "APIService", "ClusterRole", "ServiceAccount"} {
				if !strings.Contains(out, "\nkind: "+kind+"\n") {
					t.Errorf("the %s overlay makes no %s", name, kind)
				}
			}
			res, err := kubectlIn(out, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
			if err != nil {
				t.Fatalf("server-side dry run of the %s overlay: %v\n%s", name, err, res)
			}
		})
	}
}

// namespacesIn returns the names of the Namespace objects of a multi-document
// YAML stream.
func namespacesIn(t *testing.T, stream string) []string {
	t.Helper()
	var names []string
	for _, doc := range strings.Split(stream, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("decoding a kustomize document: %v", err)
		}
		if obj.Kind == "Namespace" {
			names = append(names, obj.Metadata.Name)
		}
	}
	return names
}
