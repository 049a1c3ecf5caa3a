package localcluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// SystemNamespace is where artifacts/deploy installs the product.
const SystemNamespace = "jobset-system"

// imagesManifest is the part of _output/images/images.json this suite reads.
type imagesManifest struct {
	Images []struct {
		Name      string `json:"name"`
		Reference string `json:"reference"`
	} `json:"images"`
}

// InstallInCluster deploys artifacts/deploy/overlays/embedded-etcd as its README
// says: a serving certificate in the Secret jobset-apiserver-tls, its CA as
// the APIService's caBundle, the images set with kustomize, and (for this
// cluster) the real node as the pods' node, with a toleration of its taint. The StatefulSet's volume
// is a PersistentVolume on the node, made ready for the non-root user as an
// administrator would prepare a local volume.
//
// The cluster must have a real node (REAL_NODE=1) with this checkout's
// images imported, and no JobSet API of its own (JOBSET=0).
func (c *Cluster) InstallInCluster() error {
	refs, err := ImageRefs(c.Root)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.LocalDir, "install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	overlay, err := filepath.Rel(dir, filepath.Join(c.Root, "artifacts", "deploy", "overlays", "embedded-etcd"))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(c.LocalDir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: registry.example.com/jobset/jobset-apiserver
  newName: %s
  newTag: %s
- name: registry.example.com/jobset/jobset-controller
  newName: %s
  newTag: %s
patches:
- target: {kind: APIService, name: v1alpha2.jobset.x-k8s.io}
  patch: |-
    - op: replace
      path: /spec/caBundle
      value: %s
- target: {kind: StatefulSet, name: jobset-apiserver}
  patch: &tolerate |-
    - op: add
      path: /spec/template/spec/tolerations
      value: [{key: jobset.local/real-node, operator: Exists, effect: NoSchedule}]
    - op: add
      path: /spec/template/spec/nodeSelector
      value: {jobset.local/real-node: "true"}
- target: {kind: Deployment, name: jobset-controller}
  patch: *tolerate
# The serving certificate of the controller's HTTPS /metrics, mounted and
# passed as artifacts/monitoring/controller-metrics-tls.yaml says, so that a
# scraper can verify it (the Secret has the shape cert-manager writes).
- target: {kind: Deployment, name: jobset-controller}
  patch: |-
    - op: add
      path: /spec/template/spec/volumes
      value: [{name: metrics-tls, secret: {secretName: jobset-controller-metrics-tls}}]
    - op: add
      path: /spec/template/spec/containers/0/volumeMounts
      value: [{name: metrics-tls, mountPath: /etc/jobset-metrics, readOnly: true}]
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --tls-cert-file=/etc/jobset-metrics/tls.crt
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --tls-private-key-file=/etc/jobset-metrics/tls.key
`, filepath.ToSlash(overlay),
		repo(refs["jobset-apiserver"]), tag(refs["jobset-apiserver"]),
		repo(refs["jobset-controller"]), tag(refs["jobset-controller"]),
		base64.StdEncoding.EncodeToString(caPEM))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}

	if _, err := c.NodeVolume("jobset-apiserver-0", "data-jobset-apiserver-0", false); err != nil {
		return err
	}
	steps := [][]string{
		{"create", "namespace", SystemNamespace},
		{"-n", SystemNamespace, "create", "secret", "tls", "jobset-apiserver-tls",
			"--cert", filepath.Join(c.LocalDir, "pki", "jobset-apiserver-serving.crt"),
			"--key", filepath.Join(c.LocalDir, "pki", "jobset-apiserver-serving.key")},
		{"-n", SystemNamespace, "create", "secret", "generic", "jobset-controller-metrics-tls", "--type=kubernetes.io/tls",
			"--from-file=tls.crt=" + filepath.Join(c.LocalDir, "pki", "jobset-controller-metrics-serving.crt"),
			"--from-file=tls.key=" + filepath.Join(c.LocalDir, "pki", "jobset-controller-metrics-serving.key"),
			"--from-file=ca.crt=" + filepath.Join(c.LocalDir, "pki", "ca.crt")},
		{"apply", "-k", dir},
	}
	for _, args := range steps {
		// "already exists": a reused cluster was installed before.
		if out, err := c.Kubectl("", args...); err != nil && !strings.Contains(out, "already exists") {
			return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := waitInstalled(ctx, c); err != nil {
		out, _ := c.Kubectl("", "-n", SystemNamespace, "get", "pods,statefulsets,deployments,pvc,events", "-o", "wide")
		return fmt.Errorf("the in-cluster install did not come up: %w\n%s", err, out)
	}
	fmt.Println("installed artifacts/deploy/overlays/embedded-etcd with", refs["jobset-apiserver"], "and", refs["jobset-controller"])
	return nil
}

// waitInstalled waits for the API server pod, both controller replicas and
// the APIService.
func waitInstalled(ctx context.Context, c *Cluster) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		sts, err := c.Kube.AppsV1().StatefulSets(SystemNamespace).Get(ctx, "jobset-apiserver", metav1.GetOptions{})
		if err != nil || sts.Status.ReadyReplicas < 1 {
			return false, nil
		}
		d, err := c.Kube.AppsV1().Deployments(SystemNamespace).Get(ctx, "jobset-controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas < 2 {
			return false, nil
		}
		return c.APIServiceAvailable(), nil
	})
}

// NodeVolume prepares a local volume on the real node, as an administrator
// would: a directory owned by the product's non-root user (emptied first
// when fresh) and a PersistentVolume of it, reserved for the claim of that
// name in SystemNamespace. It returns the directory.
func (c *Cluster) NodeVolume(name, claim string, fresh bool) (string, error) {
	dir := filepath.Join(c.LocalDir, "data", "node", "pv", name)
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		return "", err
	}
	pv := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: %s, name: %s}
  hostPath: {path: %s, type: Directory}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: jobset.local/real-node, operator: In, values: ["true"]}
`, name, SystemNamespace, claim, dir)
	if out, err := c.Kubectl(pv, "apply", "-f", "-"); err != nil {
		return "", fmt.Errorf("kubectl apply (the PersistentVolume %s): %v\n%s", name, err, out)
	}
	return dir, nil
}

// APIServiceAvailable reports whether the JobSet APIService is Available.
func (c *Cluster) APIServiceAvailable() bool {
	out, err := c.Kubectl("", "get", "apiservice", "v1alpha2.jobset.x-k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	return err == nil && strings.TrimSpace(out) == "True"
}

// ImageRefs reads the image references of _output/images/images.json
// ('make images'), by image name.
func ImageRefs(root string) (map[string]string, error) {
	path := filepath.Join(root, "_output", "images", "images.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: run 'make images' first", err)
	}
	var m imagesManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	refs := map[string]string{}
	for _, img := range m.Images {
		refs[img.Name] = img.Reference
	}
	for _, n := range []string{"jobset-apiserver", "jobset-controller", "jobset-inplace-agent"} {
		if refs[n] == "" {
			return nil, fmt.Errorf("%s names no image %s", path, n)
		}
	}
	return refs, nil
}

func repo(ref string) string { return ref[:strings.LastIndex(ref, ":")] }
func tag(ref string) string  { return ref[strings.LastIndex(ref, ":")+1:] }
