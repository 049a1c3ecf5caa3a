package cluster

import (
	"os"
	"path/filepath"
)

// KEDA (WITH_KEDA=1): its operator and its metrics API server, registered
// as APIService v1beta1.external.metrics.k8s.io, with the CRDs of the
// module the binaries were built from.

// kedaEnv is the environment KEDA would have in a pod (every namespace
// watched, its own namespace keda); controller-runtime takes the
// kubeconfig from KUBECONFIG.
func (c *Cluster) kedaEnv(name string) []string {
	return []string{"WATCH_NAMESPACE=", "POD_NAMESPACE=keda", "KEDA_CLUSTER_OBJECT_NAMESPACE=keda", "KUBECONFIG=" + c.kubeconfig(name)}
}

func (c *Cluster) kedaOperatorArgs() []string {
	certs := c.pki("keda-operator-certs")
	args := []string{c.bin("keda-operator"),
		"--metrics-service-bind-address=" + c.local("KEDA_OPERATOR_GRPC_PORT"),
		"--metrics-bind-address=" + c.local("KEDA_OPERATOR_METRICS_PORT"),
		"--health-probe-bind-address=" + c.local("KEDA_OPERATOR_HEALTH_PORT"),
		"--cert-dir=" + certs,
		"--ca-dir=" + certs,
		"--leader-elect=false",
	}
	return append(args, c.KedaOperatorArgs...)
}

func (c *Cluster) kedaAdapterArgs() []string {
	certs := c.pki("keda-adapter-certs")
	kc := c.kubeconfig("keda-adapter")
	args := []string{c.bin("keda-adapter"),
		"--secure-port=" + c.itoa("KEDA_ADAPTER_PORT"),
		"--bind-address=127.0.0.1",
		// Plain HTTP /metrics on every interface: keda-adapter takes no
		// address for it (see docs/autoscaling.md).
		"--port=" + c.itoa("KEDA_ADAPTER_METRICS_PORT"),
		"--cert-dir=" + certs,
		"--tls-cert-file=" + filepath.Join(certs, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(certs, "tls.key"),
		"--lister-kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--metrics-service-address=localhost:" + c.itoa("KEDA_OPERATOR_GRPC_PORT"),
	}
	return append(args, c.KedaAdapterArgs...)
}

func (c *Cluster) startKeda() error {
	dir, err := c.moduleDir("keda", "github.com/kedacore/keda/v2")
	if err != nil {
		return err
	}
	crds := filepath.Join(dir, "config", "crd", "bases")
	if _, err := os.Stat(crds); err != nil {
		return err
	}
	c.logf("installing KEDA's CRDs from %s", crds)
	// The ScaledJob CRD is too large for client-side apply's annotation.
	if _, err := c.kubectl(nil, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
		return err
	}
	if err := c.waitFor("kube-apiserver", "KEDA's CRDs Established", c.crdsEstablished("scaledobjects.keda.sh", "scaledjobs.keda.sh")); err != nil {
		return err
	}
	if err := c.applyFile("artifacts/local/keda-rbac.yaml"); err != nil {
		return err
	}
	if err := c.start("keda-operator", c.kedaOperatorArgs(), c.kedaEnv("keda-operator")...); err != nil {
		return err
	}
	if err := c.waitFor("keda-operator", "keda-operator /readyz", probeHTTP("http://"+c.local("KEDA_OPERATOR_HEALTH_PORT")+"/readyz")); err != nil {
		return err
	}
	if err := c.start("keda-adapter", c.kedaAdapterArgs(), c.kedaEnv("keda-adapter")...); err != nil {
		return err
	}
	if err := c.waitFor("keda-adapter", "keda-adapter /readyz", c.probeTLS("https://"+c.local("KEDA_ADAPTER_PORT")+"/readyz", "")); err != nil {
		return err
	}
	if err := c.applyRendered("keda-apiservice.yaml"); err != nil {
		return err
	}
	return c.waitFor("keda-adapter", "APIService v1beta1.external.metrics.k8s.io Available",
		c.hasCondition("apiservice", "v1beta1.external.metrics.k8s.io", "Available"))
}
