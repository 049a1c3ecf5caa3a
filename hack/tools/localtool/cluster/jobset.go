package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// jobset-apiserver (one on its embedded etcd, or several on the cluster's
// etcd behind a loopback balancer), registered as APIService
// v1alpha2.jobset.x-k8s.io, and jobset-controller with its standbys.

// replicaName is the component name of replica i ("jobset-apiserver",
// "jobset-apiserver-1", ...).
func replicaName(base string, i int) string {
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, i)
}

// apiServerPort is replica i's port: with one replica the jobset-apiserver
// port itself, otherwise +61+i behind the balancer on that port.
func (c *Cluster) apiServerPort(i int) int {
	if c.JobSetAPIServers == 1 {
		return c.port("JOBSET_APISERVER_PORT")
	}
	return c.PortBase + 61 + i
}

func (c *Cluster) jobSetAPIServerArgs(i int) []string {
	name := replicaName("jobset-apiserver", i)
	kc := c.kubeconfig("jobset-apiserver")
	args := []string{c.bin("jobset-apiserver"),
		"--secure-port=" + strconv.Itoa(c.apiServerPort(i)),
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + c.pki("jobset-apiserver-serving") + ".crt",
		"--tls-private-key-file=" + c.pki("jobset-apiserver-serving") + ".key",
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
	}
	if c.JobSetAPIServers == 1 {
		args = append(args, "--embedded-etcd-dir="+c.data("jobset-etcd"))
	} else {
		// Replicas share the cluster's etcd, under the server's own key
		// prefix.
		args = append(args,
			"--etcd-servers=https://"+c.local("ETCD_PORT"),
			"--etcd-cafile="+c.pki("ca")+".crt", "--etcd-certfile="+c.pki("etcd-client")+".crt", "--etcd-keyfile="+c.pki("etcd-client")+".key")
	}
	if c.WithTrainer {
		// Trainer's JobSet applies, with their bodies, for its suite.
		args = append(args,
			"--audit-policy-file="+filepath.Join(c.Root, "hack", "local", "trainer-audit-policy.yaml"),
			"--audit-log-path="+c.path("logs", name+"-audit.log"),
			"--audit-log-maxsize=100", "--audit-log-maxbackup=1")
	}
	return append(args, c.JobSetAPIServerArgs...)
}

func (c *Cluster) startJobSetAPIServers() error {
	for _, f := range []string{"artifacts/local/jobset-apiserver-rbac.yaml", "artifacts/local/jobset-controller-rbac.yaml"} {
		if err := c.applyFile(f); err != nil {
			return err
		}
	}
	var backends []string
	for i := 0; i < c.JobSetAPIServers; i++ {
		if err := c.start(replicaName("jobset-apiserver", i), c.jobSetAPIServerArgs(i), c.APIServerEnv...); err != nil {
			return err
		}
		backends = append(backends, "127.0.0.1:"+strconv.Itoa(c.apiServerPort(i)))
	}
	for i := 0; i < c.JobSetAPIServers; i++ {
		name := replicaName("jobset-apiserver", i)
		url := fmt.Sprintf("https://127.0.0.1:%d/readyz", c.apiServerPort(i))
		if err := c.waitFor(name, name+" /readyz", c.probeTLS(url, "")); err != nil {
			return err
		}
	}
	if c.JobSetAPIServers > 1 {
		// There is no kube-proxy for the host: this balancer is the
		// Service's endpoints.
		if err := c.start("jobset-apiserver-lb", []string{c.bin("localtool"), "lb", "-listen", c.local("JOBSET_APISERVER_PORT"), "-backends", strings.Join(backends, ",")}); err != nil {
			return err
		}
		if err := c.waitFor("jobset-apiserver-lb", "jobset-apiserver /readyz through the balancer",
			c.probeTLS("https://"+c.local("JOBSET_APISERVER_PORT")+"/readyz", "")); err != nil {
			return err
		}
	}
	if err := c.applyRendered("jobset-apiservice.yaml"); err != nil {
		return err
	}
	return c.waitFor("jobset-apiserver", "APIService v1alpha2.jobset.x-k8s.io Available",
		c.hasCondition("apiservice", "v1alpha2.jobset.x-k8s.io", "Available"))
}

// controllerPorts are replica i's health, metrics and secure metrics
// ports: the named ports for the first, +70+3(i-1).. for standbys.
func (c *Cluster) controllerPorts(i int) (health, metrics, secure int) {
	if i == 0 {
		return c.port("JOBSET_CONTROLLER_HEALTH_PORT"), c.port("JOBSET_CONTROLLER_METRICS_PORT"), c.port("JOBSET_CONTROLLER_SECURE_METRICS_PORT")
	}
	off := c.PortBase + 70 + 3*(i-1)
	return off, off + 1, off + 2
}

func (c *Cluster) jobSetControllerArgs(i int) []string {
	health, metrics, secure := c.controllerPorts(i)
	args := []string{c.bin("jobset-controller"),
		"--kubeconfig=" + c.kubeconfig("jobset-controller"),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", health),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics),
		fmt.Sprintf("--secure-metrics-bind-address=127.0.0.1:%d", secure),
		"--tls-cert-file=" + c.pki("jobset-controller-metrics-serving") + ".crt",
		"--tls-private-key-file=" + c.pki("jobset-controller-metrics-serving") + ".key",
	}
	return append(args, c.ControllerArgs...)
}

// startJobSetControllers starts the controller and its standbys; leader
// election picks one.
func (c *Cluster) startJobSetControllers() error {
	for i := 0; i < c.JobSetControllers; i++ {
		name := replicaName("jobset-controller", i)
		if err := c.start(name, c.jobSetControllerArgs(i), c.ControllerEnv...); err != nil {
			return err
		}
		health, _, _ := c.controllerPorts(i)
		if err := c.waitFor(name, name+" /healthz", probeHTTP(fmt.Sprintf("http://127.0.0.1:%d/healthz", health))); err != nil {
			return err
		}
	}
	return nil
}
