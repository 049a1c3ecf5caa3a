package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// component is one program of the cluster (or a set of replicas), in start
// order.
type component struct {
	// names are its programs' pid-file names.
	names []string
	// ports are the ports it listens on, with what they are, checked free
	// before anything starts.
	ports map[int]string
	// binaries it needs in BIN_DIR.
	binaries []string
	// up starts it and waits until it is ready.
	up func() error
}

// components are the cluster's programs for this configuration, in start
// order.
func (c *Cluster) components() []component {
	all := []component{
		{names: []string{"etcd"}, binaries: []string{"etcd"}, up: c.startEtcd,
			ports: map[int]string{c.port("ETCD_PORT"): "etcd", c.port("ETCD_PEER_PORT"): "etcd peer"}},
		{names: []string{"kube-apiserver"}, binaries: []string{"kube-apiserver", "kubectl"}, up: c.startKubeAPIServer,
			ports: map[int]string{c.port("APISERVER_PORT"): "kube-apiserver"}},
		{names: []string{"kube-controller-manager", "kube-scheduler"}, binaries: []string{"kube-controller-manager", "kube-scheduler"}, up: c.startControllers,
			ports: map[int]string{c.port("KCM_PORT"): "kube-controller-manager", c.port("SCHEDULER_PORT"): "kube-scheduler"}},
		{names: []string{"kwok"}, binaries: []string{"kwok"}, up: c.startKwok,
			ports: map[int]string{c.port("KWOK_PORT"): "kwok"}},
		{names: []string{"metrics-server"}, binaries: []string{"metrics-server"}, up: c.startMetricsServer,
			ports: map[int]string{c.port("METRICS_SERVER_PORT"): "metrics-server"}},
	}
	if c.withJobSet {
		api := component{binaries: []string{"jobset-apiserver", "localtool"}, up: c.startJobSetAPIServers,
			ports: map[int]string{c.port("JOBSET_APISERVER_PORT"): "jobset-apiserver"}}
		for i := 0; i < c.JobSetAPIServers; i++ {
			api.names = append(api.names, replicaName("jobset-apiserver", i))
			if c.JobSetAPIServers > 1 {
				api.ports[c.apiServerPort(i)] = fmt.Sprintf("jobset-apiserver replica %d", i)
			}
		}
		if c.JobSetAPIServers > 1 {
			api.names = append(api.names, "jobset-apiserver-lb")
		}
		ctrl := component{binaries: []string{"jobset-controller"}, up: c.startJobSetControllers, ports: map[int]string{}}
		for i := 0; i < c.JobSetControllers; i++ {
			name := replicaName("jobset-controller", i)
			ctrl.names = append(ctrl.names, name)
			h, m, s := c.controllerPorts(i)
			ctrl.ports[h], ctrl.ports[m], ctrl.ports[s] = name+" health", name+" metrics", name+" secure metrics"
		}
		all = append(all, api, ctrl)
	}
	if c.WithTrainer {
		all = append(all, component{names: []string{"trainer-controller-manager"}, binaries: []string{"trainer-controller-manager"}, up: c.startTrainer,
			ports: map[int]string{
				c.port("TRAINER_WEBHOOK_PORT"): "trainer-controller-manager webhooks",
				c.port("TRAINER_HEALTH_PORT"):  "trainer-controller-manager health",
				c.port("TRAINER_METRICS_PORT"): "trainer-controller-manager metrics",
			}})
	}
	if c.WithKeda {
		all = append(all, component{names: []string{"keda-operator", "keda-adapter"}, binaries: []string{"keda-operator", "keda-adapter"}, up: c.startKeda,
			ports: map[int]string{
				c.port("KEDA_OPERATOR_GRPC_PORT"):    "keda-operator metrics service",
				c.port("KEDA_OPERATOR_METRICS_PORT"): "keda-operator metrics",
				c.port("KEDA_OPERATOR_HEALTH_PORT"):  "keda-operator health",
				c.port("KEDA_ADAPTER_PORT"):          "keda-adapter",
				c.port("KEDA_ADAPTER_METRICS_PORT"):  "keda-adapter metrics",
			}})
	}
	// Last: metrics-server's APIService has had the time the others took.
	all = append(all, component{up: c.metricsAvailable})
	if c.RealNode {
		all = append(all, component{names: nodeComponents, up: c.realNodeUp,
			binaries: []string{"containerd", "ctr", "containerd-shim-runc-v2", "bridge", "host-local", "loopback", "coredns", "kubelet", "kube-proxy", "localtool"}})
	}
	return all
}

// Every program "localtool up" may start, so that "down" finds them all;
// and the order "down" stops them in: the clients first, so that no watch
// (kube-controller-manager watches every resource, jobsets too, through
// the aggregator) keeps an aggregated API server from finishing its
// graceful shutdown; etcd last. The real node goes before all of them.
var (
	nodeComponents = []string{"node-apiserver-forwarder", "containerd", "kubelet", "kube-proxy", "coredns"}
	stopOrder      = []string{
		"keda-operator", "trainer-controller-manager",
		"jobset-controller-3", "jobset-controller-2", "jobset-controller-1", "jobset-controller",
		"kube-controller-manager", "kube-scheduler", "kwok", "keda-adapter", "metrics-server",
		"jobset-apiserver-lb", "jobset-apiserver-3", "jobset-apiserver-2", "jobset-apiserver-1", "jobset-apiserver",
		"kube-apiserver", "etcd",
	}
)

// preflight checks, before anything starts, that nothing of this cluster
// runs, that every binary is there and every port free, and what the real
// node needs.
func (c *Cluster) preflight() error {
	for _, name := range append(append([]string{}, stopOrder...), nodeComponents...) {
		if pid, ok := c.procs.Running(name); ok {
			return fmt.Errorf("%s of the cluster in %s is already running (pid %d); run hack/local-down.sh first (with the same LOCAL_DIR)", name, c.LocalDir, pid)
		}
	}
	switch _, err := os.Stat(c.bin("jobset-apiserver")); {
	case c.JobSet == "0":
	case err == nil:
		c.withJobSet = true
	case c.JobSet == "1":
		return fmt.Errorf("JOBSET=1 but %s does not exist (go build -o %s/ ./cmd/...)", c.bin("jobset-apiserver"), c.BinDir)
	default:
		c.logf("no %s: starting the cluster without jobset-apiserver and jobset-controller", c.bin("jobset-apiserver"))
	}
	if c.WithTrainer && !c.withJobSet {
		return fmt.Errorf("WITH_TRAINER=1 needs the JobSet components (Trainer creates JobSets)")
	}
	if c.RealNode {
		if os.Geteuid() != 0 {
			return fmt.Errorf("REAL_NODE=1 needs root (namespaces, mounts, a bridge, iptables)")
		}
		for _, b := range []string{"runc", "iptables", "ip"} {
			if _, err := exec.LookPath(b); err != nil {
				return fmt.Errorf("REAL_NODE=1 needs %s: apt-get install runc iptables iproute2", b)
			}
		}
	}
	for _, comp := range c.components() {
		for _, b := range comp.binaries {
			if _, err := os.Stat(c.bin(b)); err != nil {
				return fmt.Errorf("%s is missing; run hack/build-tools.sh %s (or make tools)", c.bin(b), b)
			}
		}
		for port, what := range comp.ports {
			if err := portFree(port, what); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeImages are the archives the real node imports into containerd: the
// node images (sandbox, busybox, busybox with the in-place agent) and this
// checkout's own images.
func (c *Cluster) nodeImages() []string {
	var images []string
	for _, pattern := range []string{"_output/node-images/*.tar", "_output/images/*_linux_amd64.tar"} {
		found, _ := filepath.Glob(filepath.Join(c.Root, pattern))
		images = append(images, found...)
	}
	return images
}
