package cluster

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Kubeflow Trainer's controller manager (WITH_TRAINER=1) with its CRDs,
// RBAC, webhooks and the ClusterTrainingRuntime torch-distributed, all
// from the module the binary was built from.

const trainerNamespace = "kubeflow-system"

func (c *Cluster) startTrainer() error {
	dir, err := c.moduleDir("trainer", "github.com/kubeflow/trainer/v2")
	if err != nil {
		return err
	}
	manifests := filepath.Join(dir, "manifests")
	if _, err := os.Stat(filepath.Join(manifests, "base", "crds")); err != nil {
		return fmt.Errorf("no manifests/base/crds in the Trainer module (%s)", dir)
	}
	c.logf("Kubeflow Trainer %s: CRDs, RBAC and webhooks from %s", c.Versions["TRAINER_VERSION"], manifests)
	// The CRDs are too large for client-side apply's annotation.
	if _, err := c.kubectl(nil, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(manifests, "base", "crds")); err != nil {
		return err
	}
	if err := c.waitFor("kube-apiserver", "Trainer's CRDs Established", c.crdsEstablished(
		"trainjobs.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org")); err != nil {
		return err
	}
	if _, err := c.kubectl(nil, "apply", "-f", filepath.Join(manifests, "base", "rbac", "role.yaml")); err != nil {
		return err
	}
	if err := c.applyRendered("trainer.yaml"); err != nil {
		return err
	}
	webhooks, err := c.trainerWebhooks(filepath.Join(manifests, "base", "webhook"))
	if err != nil {
		return err
	}
	if err := c.apply(webhooks); err != nil {
		return err
	}
	config, err := c.render("trainer-config.yaml")
	if err != nil {
		return err
	}
	configPath := c.path("trainer", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(configPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return err
	}
	// controller-runtime reads the webhook serving certificate from
	// $TMPDIR/k8s-webhook-server/serving-certs: the manager gets a TMPDIR
	// of its own.
	tmp := c.data("trainer-tmp")
	certs := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := copyFile(c.pki("trainer-webhook-serving")+".crt", filepath.Join(certs, "tls.crt"), 0o644); err != nil {
		return err
	}
	if err := copyFile(c.pki("trainer-webhook-serving")+".key", filepath.Join(certs, "tls.key"), 0o600); err != nil {
		return err
	}
	args := append([]string{c.bin("trainer-controller-manager"), "--config=" + configPath}, c.TrainerArgs...)
	if err := c.start("trainer-controller-manager", args, "TMPDIR="+tmp, "KUBECONFIG="+c.kubeconfig("trainer-controller-manager")); err != nil {
		return err
	}
	if err := c.waitFor("trainer-controller-manager", "trainer-controller-manager /readyz",
		probeHTTP("http://"+c.local("TRAINER_HEALTH_PORT")+"/readyz")); err != nil {
		return err
	}
	// The runtime goes through Trainer's validating webhook: creating it
	// also proves that kube-apiserver reaches the webhooks.
	runtime := filepath.Join(manifests, "base", "runtimes", "torch_distributed.yaml")
	return c.waitFor("trainer-controller-manager", "ClusterTrainingRuntime torch-distributed (through Trainer's webhook)", func() error {
		_, err := c.kubectl(nil, "apply", "-f", runtime)
		return err
	})
}

// trainerWebhooks is Trainer's webhook configurations from its kustomize
// base, as JSON, pointed at the local Service's port and the cluster's CA.
// kubectl turns kustomize's YAML into JSON, so that they are edited as data.
func (c *Cluster) trainerWebhooks(base string) ([]byte, error) {
	yaml, err := c.kubectl(nil, "kustomize", base)
	if err != nil {
		return nil, err
	}
	asJSON, err := c.kubectl(yaml, "create", "--dry-run=client", "-o", "json", "-f", "-")
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.pki("ca") + ".crt")
	if err != nil {
		return nil, err
	}
	return patchWebhooks(asJSON, trainerNamespace, c.port("TRAINER_WEBHOOK_PORT"), base64.StdEncoding.EncodeToString(caPEM))
}

// patchWebhooks points every webhook of the objects in manifest (JSON
// objects or Lists, one after the other, as kubectl prints them) at
// namespace and port, trusting caBundle; other objects go to namespace. It
// returns one List, and fails when there is no webhook at all.
func patchWebhooks(manifest []byte, namespace string, port int, caBundle string) ([]byte, error) {
	var items []any
	dec := json.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if doc["kind"] == "List" {
			list, _ := doc["items"].([]any)
			items = append(items, list...)
		} else {
			items = append(items, doc)
		}
	}
	found := 0
	for _, it := range items {
		obj, _ := it.(map[string]any)
		switch obj["kind"] {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _ := obj["webhooks"].([]any)
			for _, h := range hooks {
				hook, _ := h.(map[string]any)
				cc, _ := hook["clientConfig"].(map[string]any)
				svc, _ := cc["service"].(map[string]any)
				if svc == nil {
					return nil, fmt.Errorf("webhook %v has no clientConfig.service", hook["name"])
				}
				svc["namespace"], svc["port"] = namespace, port
				cc["caBundle"] = caBundle
				found++
			}
		default:
			if meta, ok := obj["metadata"].(map[string]any); ok {
				meta["namespace"] = namespace
			}
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("no webhooks in the manifests")
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// crdsEstablished: every named CRD is Established.
func (c *Cluster) crdsEstablished(names ...string) func() error {
	return func() error {
		for _, n := range names {
			if err := c.hasCondition("crd", n, "Established")(); err != nil {
				return err
			}
		}
		return nil
	}
}
