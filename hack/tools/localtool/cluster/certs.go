package cluster

import (
	"fmt"
	"net/netip"

	"github.com/nativejobset/jobset/hack/tools/localtool/pki"
)

// serviceNames are the DNS names of a Service in the cluster.
func serviceNames(name, namespace string) []string {
	return []string{name, name + "." + namespace, name + "." + namespace + ".svc", name + "." + namespace + ".svc.cluster.local"}
}

// certificates are the cluster's leaf certificates. They are kept across
// restarts (package pki only replaces what no longer fits), so kubeconfigs
// handed out earlier keep working.
func (c *Cluster) certificates() []pki.Cert {
	ca, fp := c.pki("ca"), c.pki("front-proxy-ca")
	loopback := []string{"localhost", "127.0.0.1"}
	with := func(extra ...string) []string { return append(append([]string{}, loopback...), extra...) }
	client := func(name, cn string, orgs ...string) pki.Cert {
		return pki.Cert{CA: ca, Out: c.pki(name), CN: cn, Orgs: orgs, Client: true}
	}
	server := func(name, cn string, sans []string) pki.Cert {
		return pki.Cert{CA: ca, Out: c.pki(name), CN: cn, SANs: sans, Server: true}
	}
	// The first address of the Service range is the "kubernetes" Service.
	first := netip.MustParsePrefix(c.ServiceCIDR).Addr().Next().String()
	certs := []pki.Cert{
		server("etcd-server", "etcd", loopback),
		client("etcd-client", "kube-apiserver-etcd-client"),
		server("kube-apiserver", "kube-apiserver", with(c.BridgeAddress.Addr().String(), first,
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")),
		client("kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
		{CA: fp, Out: c.pki("front-proxy-client"), CN: "front-proxy-client", Client: true},
		client("admin", "admin", "system:masters"),
		client("kube-controller-manager", "system:kube-controller-manager"),
		server("kube-controller-manager-serving", "kube-controller-manager", loopback),
		client("kube-scheduler", "system:kube-scheduler"),
		server("kube-scheduler-serving", "kube-scheduler", loopback),
		// kwok acts for every fake node's kubelet: it gets the rights of
		// the cluster admin.
		client("kwok", "system:kwok", "system:masters"),
		server("kwok-serving", "kwok", loopback),
		client("metrics-server", "system:metrics-server"),
		server("metrics-server-serving", "metrics-server", with(serviceNames("metrics-server", "kube-system")...)),
		client("jobset-apiserver", "system:jobset-apiserver"),
		server("jobset-apiserver-serving", "jobset-apiserver", with(serviceNames("jobset-apiserver", "jobset-system")...)),
		client("jobset-controller", "system:jobset-controller"),
		// Also the Service's names: the real node's in-cluster install
		// serves it there.
		server("jobset-controller-metrics-serving", "jobset-controller-metrics", with(serviceNames("jobset-controller-metrics", "jobset-system")[2:]...)),
		client("trainer-controller-manager", "system:kubeflow-trainer"),
		server("trainer-webhook-serving", "kubeflow-trainer-controller-manager", with(serviceNames("kubeflow-trainer-controller-manager", "kubeflow-system")[2:]...)),
	}
	if c.WithKeda {
		certs = append(certs,
			client("keda-operator", "system:keda-operator"),
			client("keda-adapter", "system:keda-adapter"),
			// KEDA reads ca.crt, tls.crt and tls.key from a directory. The
			// adapter's certificate serves the aggregator and is also its
			// client certificate for the operator's metrics service.
			server("keda-operator-certs/tls", "keda-operator", with(serviceNames("keda-operator", "keda")...)),
			pki.Cert{CA: ca, Out: c.pki("keda-adapter-certs/tls"), CN: "keda-metrics-apiserver",
				SANs: with(serviceNames("keda-metrics-apiserver", "keda")...), Server: true, Client: true},
		)
	}
	return certs
}

// kubeconfigUsers are the programs that get a kubeconfig of their own
// (kubeconfigs/<name>.kubeconfig with the client certificate of that name).
func (c *Cluster) kubeconfigUsers() []string {
	users := []string{"kube-controller-manager", "kube-scheduler", "kwok", "metrics-server", "jobset-apiserver", "jobset-controller", "trainer-controller-manager"}
	if c.WithKeda {
		users = append(users, "keda-operator", "keda-adapter")
	}
	return users
}

// credentials makes the CAs, the service-account key, every certificate
// and every kubeconfig.
func (c *Cluster) credentials() error {
	c.logf("certificates and kubeconfigs in %s", c.LocalDir)
	if _, err := pki.EnsureCA(c.pki("ca"), "jobset-local-ca"); err != nil {
		return err
	}
	if _, err := pki.EnsureCA(c.pki("front-proxy-ca"), "jobset-local-front-proxy-ca"); err != nil {
		return err
	}
	if _, err := pki.EnsureKeyPair(c.pki("sa")); err != nil {
		return err
	}
	for _, r := range c.certificates() {
		if _, err := pki.EnsureCert(r); err != nil {
			return fmt.Errorf("%s: %w", r.Out, err)
		}
	}
	if c.WithKeda {
		for _, d := range []string{"keda-operator-certs", "keda-adapter-certs"} {
			if err := copyFile(c.pki("ca")+".crt", c.pki(d+"/ca.crt"), 0o644); err != nil {
				return err
			}
		}
	}
	if err := c.writeKubeconfig(c.adminKubeconfig(), "admin", "admin"); err != nil {
		return err
	}
	for _, u := range c.kubeconfigUsers() {
		if err := c.writeKubeconfig(c.kubeconfig(u), u, u); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the client certificate cert.
func (c *Cluster) writeKubeconfig(path, cert, user string) error {
	body := pki.Kubeconfig(c.apiURL(), c.pki("ca")+".crt", c.pki(cert)+".crt", c.pki(cert)+".key", user)
	// Paths only, no secrets: the keys beside it are 0600.
	return pki.WriteFile(path, body, 0o644)
}
