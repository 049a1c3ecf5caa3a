package node

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// CoreDNS on the host, bound to the bridge address only: the pods' cluster
// DNS. It answers for the cluster domain from the API (Services, and the
// hostname.subdomain records of pods behind headless Services, which JobSet
// relies on) and refuses every other name, as there is nothing to forward
// to.

//go:embed coredns-rbac.yaml
var coreDNSRBAC string

func (c *Config) corefile() string {
	return fmt.Sprintf(`%[1]s:53 in-addr.arpa:53 {
    bind %[2]s
    errors
    health 127.0.0.1:%[3]d
    ready 127.0.0.1:%[4]d
    prometheus 127.0.0.1:%[5]d
    kubernetes %[1]s in-addr.arpa {
        kubeconfig %[6]s jobset-local
        pods insecure
        ttl 5
    }
    cache 5
}
.:53 {
    bind %[2]s
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`, c.ClusterDomain, c.hostIP(), c.DNSHealthPort, c.DNSReadyPort, c.DNSMetricsPort, c.kubeconfig(coreDNS))
}

func (c *Config) startCoreDNS() error {
	if _, err := c.kubectl(coreDNSRBAC, "apply", "-f", "-"); err != nil {
		return err
	}
	conf := c.dir("Corefile")
	if err := os.WriteFile(conf, []byte(c.corefile()), 0o644); err != nil {
		return err
	}
	if err := c.start(proc.Process{Name: coreDNS, Argv: []string{c.bin("coredns"), "-conf", conf}}); err != nil {
		return err
	}
	return c.waitFor(coreDNS, "CoreDNS /ready", func() error {
		return httpOK(fmt.Sprintf("http://127.0.0.1:%d/ready", c.DNSReadyPort))
	})
}
