package cluster

import (
	"strconv"
	"time"
)

// The control plane: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, each on 127.0.0.1 with TLS from the cluster's CA.

func (c *Cluster) etcdArgs() []string {
	peer := "http://" + c.local("ETCD_PEER_PORT")
	client := "https://" + c.local("ETCD_PORT")
	return []string{c.bin("etcd"),
		"--name", "local",
		"--data-dir", c.data("etcd"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "local=" + peer,
		"--cert-file", c.pki("etcd-server") + ".crt", "--key-file", c.pki("etcd-server") + ".key",
		"--client-cert-auth", "--trusted-ca-file", c.pki("ca") + ".crt",
		// A throwaway cluster: durability is not worth the disk's latency.
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}
}

func (c *Cluster) startEtcd() error {
	if err := c.start("etcd", c.etcdArgs()); err != nil {
		return err
	}
	return c.waitFor("etcd", "etcd health", c.probeTLS("https://"+c.local("ETCD_PORT")+"/health", "etcd-client"))
}

func (c *Cluster) kubeAPIServerArgs() []string {
	p := c.pki
	// Without a real node nothing uses the "kubernetes" Service. With one,
	// pods reach kube-apiserver through it at the bridge address, where
	// the node forwards to 127.0.0.1.
	advertise := []string{"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"}
	if c.RealNode {
		advertise = []string{"--advertise-address=" + c.BridgeAddress.Addr().String(), "--endpoint-reconciler-type=lease"}
	}
	args := []string{c.bin("kube-apiserver"),
		"--v=" + c.LogVerbosity,
		"--bind-address=127.0.0.1",
	}
	args = append(args, advertise...)
	return append(args,
		"--secure-port="+strconv.Itoa(c.port("APISERVER_PORT")),
		"--tls-cert-file="+p("kube-apiserver")+".crt", "--tls-private-key-file="+p("kube-apiserver")+".key",
		"--client-ca-file="+p("ca")+".crt",
		"--etcd-servers=https://"+c.local("ETCD_PORT"),
		"--etcd-cafile="+p("ca")+".crt", "--etcd-certfile="+p("etcd-client")+".crt", "--etcd-keyfile="+p("etcd-client")+".key",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--service-cluster-ip-range="+c.ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa")+".pub",
		"--service-account-signing-key-file="+p("sa")+".key",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--kubelet-client-certificate="+p("kube-apiserver-kubelet-client")+".crt",
		"--kubelet-client-key="+p("kube-apiserver-kubelet-client")+".key",
		"--kubelet-certificate-authority="+p("ca")+".crt",
		"--kubelet-preferred-address-types=InternalIP",
		"--requestheader-client-ca-file="+p("front-proxy-ca")+".crt",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--proxy-client-cert-file="+p("front-proxy-client")+".crt",
		"--proxy-client-key-file="+p("front-proxy-client")+".key",
		"--enable-aggregator-routing=false",
		"--audit-policy-file="+c.AuditPolicy,
		"--audit-log-path="+c.path("logs", "kube-apiserver-audit.log"),
		"--audit-log-maxsize=100", "--audit-log-maxbackup=1",
	)
}

func (c *Cluster) startKubeAPIServer() error {
	if err := c.start("kube-apiserver", c.kubeAPIServerArgs()); err != nil {
		return err
	}
	return c.waitFor("kube-apiserver", "kube-apiserver /readyz", c.probeTLS(c.apiURL()+"/readyz", "admin"))
}

// delegated are the flags of a component that authenticates and
// authorizes its own clients through kube-apiserver, and serves TLS.
func (c *Cluster) delegated(name, serving, portName string) []string {
	kc := c.kubeconfig(name)
	return []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.port(portName)),
		"--tls-cert-file=" + c.pki(serving) + ".crt", "--tls-private-key-file=" + c.pki(serving) + ".key",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	args := append([]string{c.bin("kube-controller-manager"), "--v=" + c.LogVerbosity},
		c.delegated("kube-controller-manager", "kube-controller-manager-serving", "KCM_PORT")...)
	args = append(args,
		// Every controller: node lifecycle lifts kwok nodes' not-ready
		// taint, the garbage collector removes a JobSet's children.
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.pki("sa")+".key",
		"--root-ca-file="+c.pki("ca")+".crt",
		"--cluster-signing-cert-file="+c.pki("ca")+".crt", "--cluster-signing-key-file="+c.pki("ca")+".key",
		"--service-cluster-ip-range="+c.ServiceCIDR,
		"--flex-volume-plugin-dir="+c.data("flexvolume"),
		"--leader-elect=false",
		// A node is healthy while its Lease was renewed within the grace
		// period: kwok renews every quarter of the Lease's duration.
		"--node-monitor-grace-period="+c.nodeMonitorGracePeriod().String(),
	)
	return append(args, c.KCMArgs...)
}

// nodeMonitorGracePeriod is the Lease duration plus 10 s: 50 s, kube-
// controller-manager's default, for a kubelet's default Lease of 40 s.
func (c *Cluster) nodeMonitorGracePeriod() time.Duration {
	return time.Duration(c.NodeLeaseSeconds+10) * time.Second
}

func (c *Cluster) schedulerArgs() []string {
	args := append([]string{c.bin("kube-scheduler"), "--v=" + c.LogVerbosity},
		c.delegated("kube-scheduler", "kube-scheduler-serving", "SCHEDULER_PORT")...)
	args = append(args, "--leader-elect=false")
	return append(args, c.SchedulerArgs...)
}

// startControllers starts kube-controller-manager and kube-scheduler side
// by side, then waits for both.
func (c *Cluster) startControllers() error {
	if err := c.start("kube-controller-manager", c.controllerManagerArgs()); err != nil {
		return err
	}
	if err := c.start("kube-scheduler", c.schedulerArgs()); err != nil {
		return err
	}
	if err := c.waitFor("kube-controller-manager", "kube-controller-manager /healthz", c.probeTLS("https://"+c.local("KCM_PORT")+"/healthz", "")); err != nil {
		return err
	}
	return c.waitFor("kube-scheduler", "kube-scheduler /readyz", c.probeTLS("https://"+c.local("SCHEDULER_PORT")+"/readyz", ""))
}

// metricsServerArgs: metrics-server reads the kwok nodes' resource metrics
// through kwok's kubelet port.
func (c *Cluster) metricsServerArgs() []string {
	args := append([]string{c.bin("metrics-server")}, c.delegated("metrics-server", "metrics-server-serving", "METRICS_SERVER_PORT")...)
	return append(args,
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority="+c.pki("ca")+".crt",
		"--metric-resolution=15s",
	)
}

func (c *Cluster) startMetricsServer() error {
	if err := c.applyFile("artifacts/local/metrics-server-rbac.yaml"); err != nil {
		return err
	}
	if err := c.start("metrics-server", c.metricsServerArgs()); err != nil {
		return err
	}
	if err := c.waitFor("metrics-server", "metrics-server /livez", c.probeTLS("https://"+c.local("METRICS_SERVER_PORT")+"/livez", "")); err != nil {
		return err
	}
	// Its APIService turns Available later; the wait for it comes last
	// (metricsAvailable), so that the rest starts meanwhile.
	return c.applyRendered("metrics-apiservice.yaml")
}

func (c *Cluster) metricsAvailable() error {
	return c.waitFor("metrics-server", "APIService v1beta1.metrics.k8s.io Available",
		c.hasCondition("apiservice", "v1beta1.metrics.k8s.io", "Available"))
}
