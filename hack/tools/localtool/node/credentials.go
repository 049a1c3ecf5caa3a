package node

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/nativejobset/jobset/hack/tools/localtool/pki"
	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// credentials issues the node's certificates from the cluster's CA (with
// "localtool cert", which keeps valid ones) and writes their kubeconfigs.
// Each identity is one the API server's authorizers already know: the
// kubelet is system:node:<name> in system:nodes (the Node authorizer),
// kube-proxy is system:kube-proxy (bound to system:node-proxier by default),
// CoreDNS gets the read-only role of coredns-rbac.yaml.
func (c *Config) credentials() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ca := c.pki("ca")
	certs := [][]string{
		{"-out", c.pki("node-kubelet"), "-cn", "system:node:" + c.Name, "-o", "system:nodes", "-client"},
		{"-out", c.pki("node-kubelet-serving"), "-cn", c.Name, "-server", "-san", strings.Join([]string{c.Name, "localhost", "127.0.0.1", c.hostIP()}, ",")},
		{"-out", c.pki("node-kube-proxy"), "-cn", "system:kube-proxy", "-client"},
		{"-out", c.pki("node-coredns"), "-cn", "system:coredns", "-client"},
	}
	for _, args := range certs {
		args = append([]string{"cert", "-ca", ca}, args...)
		if out, err := exec.Command(self, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("localtool %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for name, cert := range map[string]string{kubelet: "node-kubelet", kubeProxy: "node-kube-proxy", coreDNS: "node-coredns"} {
		if err := c.writeKubeconfig(name, cert); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) writeKubeconfig(name, cert string) error {
	kc := pki.Kubeconfig(c.apiURL(), c.pki("ca.crt"), c.pki(cert+".crt"), c.pki(cert+".key"), name)
	path := c.kubeconfig(name)
	if err := os.WriteFile(path+".tmp", kc, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// startAPIForwarder makes kube-apiserver, which listens on 127.0.0.1 only,
// reachable from pods at the bridge address and the same port: the address
// it advertises, so the "kubernetes" Service's endpoint.
func (c *Config) startAPIForwarder() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	listen := net.JoinHostPort(c.hostIP(), strconv.Itoa(c.APIServerPort))
	if err := c.start(proc.Process{Name: apiForwarder, Argv: []string{self, "lb",
		"-listen", listen, "-listen-interface", c.Bridge,
		"-backends", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.APIServerPort))}}); err != nil {
		return err
	}
	return c.waitFor(apiForwarder, "kube-apiserver at "+listen, func() error { return dialable(listen) })
}
