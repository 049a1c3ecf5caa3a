package node

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// kube-proxy in iptables mode: ClusterIP Services for pods (and for
// kube-apiserver's aggregator, whose connections to a Service's ClusterIP
// start on this host). Its health and metrics listen on loopback; node
// ports only on the bridge.

func (c *Config) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
bindAddress: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
mode: iptables
clusterCIDR: %q
nodePortAddresses: [%q]
iptables:
  localhostNodePorts: false
# Leave the host's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.kubeconfig(kubeProxy), c.Name, c.hostIP(), c.ProxyHealthPort, c.ProxyMetricsPort, c.podSubnet(), c.podSubnet())
}

func (c *Config) startKubeProxy() error {
	conf := c.dir("kube-proxy-config.yaml")
	if err := os.WriteFile(conf, []byte(c.kubeProxyConfig()), 0o644); err != nil {
		return err
	}
	if err := c.start(proc.Process{Name: kubeProxy, Argv: []string{c.bin("kube-proxy"), "--config=" + conf, "--v=1"}}); err != nil {
		return err
	}
	return c.waitFor(kubeProxy, "kube-proxy /healthz", func() error {
		return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.ProxyHealthPort))
	})
}

// httpOK makes one GET to a loopback health endpoint.
func httpOK(url string) error {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
