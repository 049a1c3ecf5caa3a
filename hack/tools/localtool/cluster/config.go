package cluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// setting is one environment variable of "localtool up": its default and
// what it means, for the parser and for the help text alike.
type setting struct {
	name, def, help string
}

// settings are the cluster's knobs, in the order the help lists them. Ports
// are PORT_BASE plus an offset unless set themselves (ports below).
var settings = []setting{
	{"LOCAL_DIR", "_output/local", "state directory (pki/, kubeconfigs/, logs/, pids/, data/); one per cluster"},
	{"BIN_DIR", "_output/bin", "the binaries"},
	{"PORT_BASE", "26400", "first of the cluster's ports on 127.0.0.1 (two clusters need two bases and two LOCAL_DIRs)"},
	{"NODES", "4", "number of fake nodes kwok-node-0..N-1"},
	{"NODES_PER_RACK", "2", "nodes sharing a rack label (topology.jobset.x-k8s.io/rack)"},
	{"NODES_PER_POOL", "2", "nodes sharing a node pool (cloud.google.com/gke-nodepool)"},
	{"ZONES", "2", "racks are spread over zones zone-a, zone-b, ... (1..26)"},
	{"NODE_CPU", "32", "allocatable CPU of each fake node"},
	{"NODE_MEMORY", "128Gi", "allocatable memory of each fake node"},
	{"NODE_PODS", "110", "allocatable pods of each fake node"},
	{"NODE_STATUS_SECONDS", "240", "kwok refreshes each fake node's status heartbeat every N to 1.25 N seconds (a kubelet reports an unchanged status every 5 minutes); raise it for thousands of nodes"},
	{"NODE_LEASE_SECONDS", "40", "the fake nodes' Lease duration (a kubelet's default): kwok renews each Lease every quarter of it, and kube-controller-manager's --node-monitor-grace-period is set to it plus 10 s; raise it for thousands of nodes (at 40, 5,000 nodes renew 500 Leases a second)"},
	{"SERVICE_CIDR", "10.96.0.0/16", "the Services' range"},
	{"POD_CIDR", "10.244.0.0/16", "the fake pods' addresses (nothing connects to them)"},
	{"JOBSET", "auto", "auto: start jobset-apiserver and jobset-controller when BIN_DIR has them; 0: never; 1: required"},
	{"JOBSET_APISERVERS", "1", "1: one jobset-apiserver on its embedded etcd; 2..4: that many on the cluster's etcd (their own key prefix), on ports +61.., behind a round-robin loopback balancer (jobset-apiserver-lb) on the jobset-apiserver port"},
	{"JOBSET_CONTROLLERS", "1", "1..4 jobset-controller processes with leader election; the further ones use ports +70+3(i-1).."},
	{"JOBSET_APISERVER_ARGS", "", "extra flags of every jobset-apiserver (split at spaces)"},
	{"JOBSET_CONTROLLER_ARGS", "", "extra flags of every jobset-controller (split at spaces)"},
	{"JOBSET_APISERVER_ENV", "", "extra environment of every jobset-apiserver, NAME=value pairs split at spaces (e.g. GOGC=50)"},
	{"JOBSET_CONTROLLER_ENV", "", "extra environment of every jobset-controller, NAME=value pairs split at spaces (e.g. GOGC=25)"},
	{"KUBE_CONTROLLER_MANAGER_ARGS", "", "extra flags of kube-controller-manager"},
	{"KUBE_SCHEDULER_ARGS", "", "extra flags of kube-scheduler"},
	{"LOG_VERBOSITY", "1", "--v of the kube components"},
	{"AUDIT_POLICY", "hack/local/audit-policy.yaml", "kube-apiserver's audit policy (log: LOCAL_DIR/logs/kube-apiserver-audit.log); hack/local/audit-policy-pods.yaml also records the writes of Jobs and pods, for timelines"},
	{"WAIT_TIMEOUT", "120", "seconds to wait for each component"},
	{"WITH_TRAINER", "0", "1: also run Kubeflow Trainer's controller manager (TRAINER_VERSION in hack/versions.env) with its CRDs, webhooks and ClusterTrainingRuntime torch-distributed; needs the JobSet components"},
	{"TRAINER_ARGS", "", "extra flags of trainer-controller-manager"},
	{"WITH_KEDA", "0", "1: also run KEDA's operator and metrics API server (keda-operator, keda-adapter) with its CRDs from the module pinned as KEDA_VERSION"},
	{"KEDA_OPERATOR_ARGS", "", "extra flags of keda-operator"},
	{"KEDA_ADAPTER_ARGS", "", "extra flags of keda-adapter"},
	{"REAL_NODE", "0", "1: also run one real node (root): containerd + Debian's runc, the CNI bridge, a kubelet, kube-proxy and CoreDNS (package node); the node jobset-node-0 carries the label and NoSchedule taint jobset.local/real-node=true"},
	{"NODE_BRIDGE_ADDRESS", "10.88.0.1/24", "the host's address on the real node's pod bridge jobset0; its prefix is the pod subnet"},
	{"KEEP_ON_FAILURE", "0", "1: leave the processes running when start-up fails"},
	{"CLEAN", "0", "1: wipe the cluster data (not the certificates) first"},
	{"DETACH", "0", "1: return once everything is ready (also --detach); otherwise stay in the foreground until Ctrl-C"},
	{"DEMO", "0", "1: apply artifacts/examples/simple.yaml and wait for it (also --demo)"},
}

// ports are the cluster's ports: name, offset from PORT_BASE, what it is.
var ports = []struct {
	name   string
	offset int
	help   string
}{
	{"ETCD_PORT", 0, "etcd (clients, TLS)"},
	{"ETCD_PEER_PORT", 1, "etcd peers"},
	{"KWOK_PORT", 10, "kwok"},
	{"APISERVER_PORT", 43, "kube-apiserver"},
	{"METRICS_SERVER_PORT", 44, "metrics-server"},
	{"JOBSET_APISERVER_PORT", 45, "jobset-apiserver"},
	{"JOBSET_CONTROLLER_HEALTH_PORT", 47, "jobset-controller /healthz"},
	{"JOBSET_CONTROLLER_METRICS_PORT", 48, "jobset-controller /metrics (plain HTTP)"},
	{"JOBSET_CONTROLLER_SECURE_METRICS_PORT", 49, "jobset-controller /metrics (HTTPS, delegated authentication and authorization)"},
	{"KCM_PORT", 57, "kube-controller-manager"},
	{"SCHEDULER_PORT", 59, "kube-scheduler"},
	{"TRAINER_WEBHOOK_PORT", 80, "Trainer's webhooks"},
	{"TRAINER_HEALTH_PORT", 81, "Trainer's health"},
	{"TRAINER_METRICS_PORT", 82, "Trainer's metrics"},
	{"KEDA_OPERATOR_GRPC_PORT", 84, "keda-operator's metrics service (gRPC)"},
	{"KEDA_OPERATOR_METRICS_PORT", 85, "keda-operator's metrics"},
	{"KEDA_OPERATOR_HEALTH_PORT", 86, "keda-operator's health"},
	{"KEDA_ADAPTER_PORT", 87, "keda-adapter (HTTPS)"},
	{"KEDA_ADAPTER_METRICS_PORT", 88, "keda-adapter's plain HTTP /metrics"},
}

// Config is the cluster as the environment asks for it.
type Config struct {
	Root     string // the checkout
	LocalDir string
	BinDir   string
	PortBase int
	Port     map[string]int // by the names of ports

	Nodes, NodesPerRack, NodesPerPool, Zones int
	NodeCPU, NodeMemory, NodePods            string
	NodeStatusSeconds, NodeLeaseSeconds      int
	ServiceCIDR, PodCIDR                     string

	JobSet                              string // auto, 0 or 1 (normalised)
	JobSetAPIServers, JobSetControllers int
	JobSetAPIServerArgs, ControllerArgs []string
	APIServerEnv, ControllerEnv         []string
	KCMArgs, SchedulerArgs, TrainerArgs []string
	KedaOperatorArgs, KedaAdapterArgs   []string
	WithTrainer, WithKeda, RealNode     bool
	BridgeAddress                       netip.Prefix
	LogVerbosity                        string
	AuditPolicy                         string // a file
	Wait                                time.Duration
	KeepOnFailure, Clean, Detach, Demo  bool
	Versions                            map[string]string // hack/versions.env
}

// FromEnv reads the settings from getenv (os.Getenv in use) with root as
// the checkout; every bad value is reported, with its variable's name.
func FromEnv(root string, getenv func(string) string) (*Config, error) {
	get := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		for _, s := range settings {
			if s.name == name {
				return s.def
			}
		}
		return ""
	}
	var errs []string
	number := func(name string, lo, hi int) int {
		v := get(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Sprintf("%s must be a number in %d..%d, got %q", name, lo, hi, v))
		}
		return n
	}
	flag := func(name string) bool {
		switch v := get(name); v {
		case "1", "true", "yes":
			return true
		case "0", "false", "no":
			return false
		default:
			errs = append(errs, fmt.Sprintf("%s must be 0 or 1, got %q", name, v))
			return false
		}
	}
	// environment reads NAME=value pairs split at spaces.
	environment := func(name string) []string {
		pairs := strings.Fields(get(name))
		for _, kv := range pairs {
			if key, _, ok := strings.Cut(kv, "="); !ok || key == "" {
				errs = append(errs, fmt.Sprintf("%s: %q is not NAME=value", name, kv))
			}
		}
		return pairs
	}
	c := &Config{Root: root, Port: map[string]int{}}
	c.LocalDir = absolute(root, getenv("LOCAL_DIR"), get("LOCAL_DIR"))
	c.BinDir = absolute(root, getenv("BIN_DIR"), get("BIN_DIR"))
	c.PortBase = number("PORT_BASE", 1, 65535-100)
	for _, p := range ports {
		if v := getenv(p.name); v != "" {
			c.Port[p.name] = number(p.name, 1, 65535)
		} else {
			c.Port[p.name] = c.PortBase + p.offset
		}
	}
	c.Nodes = number("NODES", 0, 100000)
	c.NodesPerRack = number("NODES_PER_RACK", 1, 100000)
	c.NodesPerPool = number("NODES_PER_POOL", 1, 100000)
	c.Zones = number("ZONES", 1, 26)
	c.NodeCPU, c.NodeMemory, c.NodePods = get("NODE_CPU"), get("NODE_MEMORY"), get("NODE_PODS")
	c.NodeStatusSeconds = number("NODE_STATUS_SECONDS", 10, 3600)
	c.NodeLeaseSeconds = number("NODE_LEASE_SECONDS", 10, 3600)
	c.ServiceCIDR, c.PodCIDR = get("SERVICE_CIDR"), get("POD_CIDR")
	for _, n := range []string{"SERVICE_CIDR", "POD_CIDR"} {
		if p, err := netip.ParsePrefix(get(n)); err != nil || !p.Addr().Is4() || p != p.Masked() {
			errs = append(errs, fmt.Sprintf("%s must be an IPv4 network like 10.96.0.0/16, got %q", n, get(n)))
		}
	}
	switch v := get("JOBSET"); v {
	case "auto":
		c.JobSet = "auto"
	case "1", "true", "yes":
		c.JobSet = "1"
	case "0", "false", "no":
		c.JobSet = "0"
	default:
		errs = append(errs, fmt.Sprintf("JOBSET must be auto, 0 or 1, got %q", v))
	}
	c.JobSetAPIServers = number("JOBSET_APISERVERS", 1, 4)
	c.JobSetControllers = number("JOBSET_CONTROLLERS", 1, 4)
	c.JobSetAPIServerArgs = strings.Fields(get("JOBSET_APISERVER_ARGS"))
	c.ControllerArgs = strings.Fields(get("JOBSET_CONTROLLER_ARGS"))
	c.APIServerEnv = environment("JOBSET_APISERVER_ENV")
	c.ControllerEnv = environment("JOBSET_CONTROLLER_ENV")
	c.KCMArgs = strings.Fields(get("KUBE_CONTROLLER_MANAGER_ARGS"))
	c.SchedulerArgs = strings.Fields(get("KUBE_SCHEDULER_ARGS"))
	c.TrainerArgs = strings.Fields(get("TRAINER_ARGS"))
	c.KedaOperatorArgs = strings.Fields(get("KEDA_OPERATOR_ARGS"))
	c.KedaAdapterArgs = strings.Fields(get("KEDA_ADAPTER_ARGS"))
	c.WithTrainer, c.WithKeda, c.RealNode = flag("WITH_TRAINER"), flag("WITH_KEDA"), flag("REAL_NODE")
	if p, err := netip.ParsePrefix(get("NODE_BRIDGE_ADDRESS")); err != nil || !p.Addr().Is4() || p.Addr() == p.Masked().Addr() {
		errs = append(errs, fmt.Sprintf("NODE_BRIDGE_ADDRESS must be the host's IPv4 address with the pod subnet's prefix, like 10.88.0.1/24, got %q", get("NODE_BRIDGE_ADDRESS")))
	} else {
		c.BridgeAddress = p
	}
	c.LogVerbosity = strconv.Itoa(number("LOG_VERBOSITY", 0, 10))
	c.AuditPolicy = absolute(root, getenv("AUDIT_POLICY"), get("AUDIT_POLICY"))
	if st, err := os.Stat(c.AuditPolicy); err != nil || st.IsDir() {
		errs = append(errs, fmt.Sprintf("AUDIT_POLICY must name a file, got %q", c.AuditPolicy))
	}
	c.Wait = time.Duration(number("WAIT_TIMEOUT", 1, 3600)) * time.Second
	c.KeepOnFailure, c.Clean = flag("KEEP_ON_FAILURE"), flag("CLEAN")
	c.Detach, c.Demo = flag("DETACH"), flag("DEMO")
	if c.WithTrainer && c.JobSet == "0" {
		errs = append(errs, "WITH_TRAINER=1 needs the JobSet components (Trainer creates JobSets), but JOBSET=0")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("bad settings:\n  %s", strings.Join(errs, "\n  "))
	}
	var err error
	if c.Versions, err = readVersions(filepath.Join(root, "hack", "versions.env")); err != nil {
		return nil, err
	}
	return c, nil
}

// absolute is a directory setting as an absolute path: a value given is
// relative to the working directory, the default to the checkout.
func absolute(root, given, def string) string {
	if given == "" {
		return filepath.Join(root, def)
	}
	if p, err := filepath.Abs(given); err == nil {
		return p
	}
	return filepath.Clean(given)
}

// readVersions reads the NAME=value lines of hack/versions.env.
func readVersions(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out, nil
}

// Help is the text of "localtool up -h": every setting and port.
func Help() string {
	var b strings.Builder
	b.WriteString(`Usage: hack/local-up.sh [--detach] [--demo]   (or: localtool up)

Starts the local cluster: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok with fake nodes, metrics-server, jobset-apiserver
(APIService v1alpha2.jobset.x-k8s.io) and jobset-controller, all on
127.0.0.1, and on request Kubeflow Trainer, KEDA and a real node. Stop it
with hack/local-down.sh (or Ctrl-C in the foreground). The admin
kubeconfig is LOCAL_DIR/kubeconfig; LOCAL_DIR/env exports it.

Environment (default in brackets):
`)
	for _, s := range settings {
		fmt.Fprintf(&b, "  %-30s [%s]\n      %s\n", s.name, s.def, s.help)
	}
	b.WriteString("\nPorts (PORT_BASE + offset, each settable by its name):\n")
	sorted := append(ports[:0:0], ports...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].offset < sorted[j].offset })
	for _, p := range sorted {
		fmt.Fprintf(&b, "  +%-3d %-38s %s\n", p.offset, p.name, p.help)
	}
	b.WriteString("  +61.. jobset-apiserver replicas (JOBSET_APISERVERS > 1); +70.. standby controllers; +90..+96 the real node\n")
	return b.String()
}
