// Package node runs one real Kubernetes node beside the local control
// plane: containerd with runc, the CNI bridge, a kubelet, kube-proxy and
// CoreDNS, each a component with its configuration, its readiness check and
// its teardown. Pods on it run real containers on a bridge with no route
// off the machine (see network.go).
//
//	localtool node up   [flags]   start the node (idempotent pieces, fails if it runs)
//	localtool node down [flags]   stop it and undo everything up did on the host
package node

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is what both subcommands need; the flags fill it.
type Config struct {
	LocalDir string // the local cluster's state directory (pki/, logs/, pids/, data/)
	BinDir   string // the cluster's binaries
	Name     string // the Node's name

	Bridge        string       // the host bridge the pods hang off
	BridgeAddress netip.Prefix // the host's address on it; the prefix is the pod subnet
	ServiceCIDR   string
	ClusterDomain string

	APIServerPort     int // kube-apiserver on 127.0.0.1, forwarded from the bridge address
	KubeletPort       int
	KubeletHealthPort int
	ProxyHealthPort   int
	ProxyMetricsPort  int
	DNSHealthPort     int
	DNSReadyPort      int
	DNSMetricsPort    int

	Images []string // docker archives imported into containerd
	Runc   string
	Wait   time.Duration
	Stdout *os.File
}

// The node's label and taint: only pods that ask for it land there.
const (
	// SandboxImage is the pod sandbox image (built by hack/release
	// node-images and imported, as nothing can be pulled).
	SandboxImage = "localhost/jobset-local/pause:v1"
	RoleKey      = "jobset.local/real-node"
	RoleValue    = "true"
)

// Main runs "localtool node <up|down> [flags]".
func Main(args []string) error {
	if len(args) < 1 || (args[0] != "up" && args[0] != "down") {
		return fmt.Errorf("usage: localtool node up|down [flags] (-h lists them)")
	}
	c, err := parseFlags(args[0], args[1:])
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the real node needs root (namespaces, mounts, a bridge, iptables)")
	}
	if args[0] == "up" {
		return c.Up()
	}
	return c.Down()
}

func parseFlags(verb string, args []string) (*Config, error) {
	c := &Config{Stdout: os.Stdout}
	fs := flag.NewFlagSet("node "+verb, flag.ContinueOnError)
	fs.StringVar(&c.LocalDir, "local-dir", "", "the local cluster's state directory (required)")
	fs.StringVar(&c.BinDir, "bin-dir", "", "directory of the cluster's binaries (required)")
	fs.StringVar(&c.Name, "name", "jobset-node-0", "the Node's name")
	fs.StringVar(&c.Bridge, "bridge", "jobset0", "name of the pods' bridge")
	bridgeAddr := fs.String("bridge-address", "10.88.0.1/24", "the host's address on the bridge; its prefix is the pod subnet")
	fs.StringVar(&c.ServiceCIDR, "service-cidr", "10.96.0.0/16", "the cluster's Service CIDR (routed into the host from pods)")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	portBase := fs.Int("port-base", 26400, "the local cluster's PORT_BASE; the node's ports are +90..+96")
	fs.IntVar(&c.APIServerPort, "apiserver-port", 0, "kube-apiserver's port on 127.0.0.1 (default PORT_BASE+43)")
	images := fs.String("images", "", "comma-separated docker archives to import into containerd")
	fs.StringVar(&c.Runc, "runc", "/usr/sbin/runc", "the runc binary")
	fs.DurationVar(&c.Wait, "wait", 120*time.Second, "how long to wait for each component")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.LocalDir == "" || c.BinDir == "" {
		return nil, fmt.Errorf("-local-dir and -bin-dir are required")
	}
	var err error
	if c.LocalDir, err = filepath.Abs(c.LocalDir); err != nil {
		return nil, err
	}
	if c.BinDir, err = filepath.Abs(c.BinDir); err != nil {
		return nil, err
	}
	if c.BridgeAddress, err = netip.ParsePrefix(*bridgeAddr); err != nil || !c.BridgeAddress.Addr().Is4() {
		return nil, fmt.Errorf("-bridge-address: want an IPv4 address with its prefix like 10.88.0.1/24, got %q", *bridgeAddr)
	}
	if c.BridgeAddress.Addr() == c.BridgeAddress.Masked().Addr() {
		return nil, fmt.Errorf("-bridge-address: %s is the subnet's own address; give the host's, like 10.88.0.1/24", *bridgeAddr)
	}
	if _, err := netip.ParsePrefix(c.ServiceCIDR); err != nil {
		return nil, fmt.Errorf("-service-cidr: %v", err)
	}
	if c.APIServerPort == 0 {
		c.APIServerPort = *portBase + 43
	}
	c.KubeletPort = *portBase + 90
	c.KubeletHealthPort = *portBase + 91
	c.ProxyHealthPort = *portBase + 92
	c.ProxyMetricsPort = *portBase + 93
	c.DNSHealthPort = *portBase + 94
	c.DNSReadyPort = *portBase + 95
	c.DNSMetricsPort = *portBase + 96
	for _, f := range strings.Split(*images, ",") {
		if f = strings.TrimSpace(f); f != "" {
			c.Images = append(c.Images, f)
		}
	}
	return c, nil
}

func (c *Config) logf(format string, args ...any) {
	fmt.Fprintf(c.Stdout, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// The node's files: everything below data/node, so that "hack/local-down.sh
// --clean" removes it with the rest of the cluster's data.
func (c *Config) dir(elem ...string) string {
	return filepath.Join(append([]string{c.LocalDir, "data", "node"}, elem...)...)
}
func (c *Config) pki(name string) string { return filepath.Join(c.LocalDir, "pki", name) }
func (c *Config) kubeconfig(name string) string {
	return filepath.Join(c.LocalDir, "kubeconfigs", name+".kubeconfig")
}
func (c *Config) logDir() string             { return filepath.Join(c.LocalDir, "logs") }
func (c *Config) pidFile(name string) string { return filepath.Join(c.LocalDir, "pids", name+".pid") }
func (c *Config) bin(name string) string     { return filepath.Join(c.BinDir, name) }
func (c *Config) hostIP() string             { return c.BridgeAddress.Addr().String() }
func (c *Config) podSubnet() string          { return c.BridgeAddress.Masked().String() }
func (c *Config) apiURL() string             { return fmt.Sprintf("https://127.0.0.1:%d", c.APIServerPort) }

// Components in start order; Down stops them in reverse.
const (
	apiForwarder = "node-apiserver-forwarder"
	containerd   = "containerd"
	kubelet      = "kubelet"
	kubeProxy    = "kube-proxy"
	coreDNS      = "coredns"
)

// Up starts the node and returns once it is Ready, with Services and DNS
// working; on failure it undoes what it did.
func (c *Config) Up() (err error) {
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "kubelet", "kube-proxy", "coredns", "bridge", "host-local", "loopback", "localtool", "kubectl"} {
		if _, err := os.Stat(c.bin(b)); err != nil {
			return fmt.Errorf("%s is missing; run hack/build-tools.sh (the real node's tools: %s)", c.bin(b), b)
		}
	}
	for _, b := range []string{c.Runc, "/usr/sbin/iptables", "/usr/sbin/ip"} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: install Debian's runc, iptables and iproute2", b)
		}
	}
	for _, name := range []string{apiForwarder, containerd, kubelet, kubeProxy, coreDNS} {
		if pid, ok := c.running(name); ok {
			return fmt.Errorf("%s of the node in %s already runs (pid %d); run 'localtool node down' first", name, c.LocalDir, pid)
		}
	}
	for _, d := range []string{c.dir(), c.logDir(), filepath.Join(c.LocalDir, "pids"), filepath.Join(c.LocalDir, "kubeconfigs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			c.logf("node start-up failed; undoing it")
			if derr := c.Down(); derr != nil {
				c.logf("undoing failed too: %v", derr)
			}
		}
	}()
	steps := []struct {
		what string
		fn   func() error
	}{
		{"network", c.networkUp},
		{"credentials", c.credentials},
		{"kube-apiserver forwarder", c.startAPIForwarder},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kubelet", c.startKubelet},
		{"kube-proxy", c.startKubeProxy},
		{"CoreDNS", c.startCoreDNS},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	c.logf("node %s is Ready (pods on %s, DNS at %s)", c.Name, c.podSubnet(), c.hostIP())
	return nil
}

// Down stops the node's components and removes what they left on the host:
// containers, mounts, cgroups, iptables rules, the bridge. Safe to run when
// nothing (or only part) is running.
func (c *Config) Down() error {
	var errs []string
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", what, err))
		}
	}
	for _, name := range []string{coreDNS, kubeProxy, kubelet} {
		note("stop "+name, c.stop(name, 20*time.Second))
	}
	note("containers", c.killContainers())
	note("stop containerd", c.stop(containerd, 20*time.Second))
	note("shims", c.killShims())
	note("stop forwarder", c.stop(apiForwarder, 5*time.Second))
	note("mounts", c.unmountAll())
	note("cgroups", c.removeCgroups())
	note("network", c.networkDown())
	c.deleteNodeObject()
	if len(errs) > 0 {
		return fmt.Errorf("node teardown left something behind:\n  %s", strings.Join(errs, "\n  "))
	}
	c.logf("node %s stopped and cleaned up", c.Name)
	return nil
}
