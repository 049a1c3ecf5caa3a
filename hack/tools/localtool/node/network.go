package node

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The pods' network: a host bridge whose address is the pods' gateway to
// this machine only. Pods get routes to the pod subnet and the Service CIDR,
// no default route; the host forwards between pods (a ClusterIP that kube-
// proxy rewrites to another pod) but a guard chain drops any forwarding
// between the bridge and another interface, so nothing a pod sends leaves
// the machine and nothing from outside reaches a pod.

const guardChain = "JOBSET-NODE-GUARD"

// The host settings the node needs, with the values it sets; Down puts the
// saved values back.
var sysctls = []struct{ key, value string }{
	// Bridged packets pass iptables, so that kube-proxy's rules also apply
	// between two pods of the bridge.
	{"net/bridge/bridge-nf-call-iptables", "1"},
	// A Service's packets from a pod to another pod are routed by the host.
	{"net/ipv4/ip_forward", "1"},
}

// The settings the kubelet changes itself (unless told to fail instead,
// protectKernelDefaults) and Down puts back too.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

func (c *Config) networkUp() error {
	saved := c.dir("sysctl-saved")
	if _, err := os.Stat(saved); os.IsNotExist(err) {
		var b strings.Builder
		keys := append([]string{}, kubeletSysctls...)
		for _, s := range sysctls {
			keys = append(keys, s.key)
		}
		for _, key := range keys {
			v, err := os.ReadFile(filepath.Join("/proc/sys", key))
			if err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			fmt.Fprintf(&b, "%s %s\n", key, strings.TrimSpace(string(v)))
		}
		if err := os.WriteFile(saved, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	for _, s := range sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", s.key), []byte(s.value), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", s.key, err)
		}
	}
	if _, err := net.InterfaceByName(c.Bridge); err != nil {
		if err := run("ip", "link", "add", c.Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := run("ip", "addr", "replace", c.BridgeAddress.String(), "dev", c.Bridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", c.Bridge, "up"); err != nil {
		return err
	}
	// The guard chain, first in FORWARD.
	if err := run("iptables", "-w", "-N", guardChain); err != nil && !strings.Contains(err.Error(), "exists") {
		return err
	}
	if err := run("iptables", "-w", "-F", guardChain); err != nil {
		return err
	}
	rules := [][]string{
		{"-i", c.Bridge, "-o", c.Bridge, "-j", "ACCEPT"},
		{"-i", c.Bridge, "-j", "DROP"},
		{"-o", c.Bridge, "-j", "DROP"},
	}
	for _, r := range rules {
		args := append([]string{"-w", "-A", guardChain}, r...)
		args = append(args, "-m", "comment", "--comment", "jobset local node: pods reach this machine only")
		if err := run("iptables", args...); err != nil {
			return err
		}
	}
	if run("iptables", "-w", "-C", "FORWARD", "-j", guardChain) != nil {
		if err := run("iptables", "-w", "-I", "FORWARD", "1", "-j", guardChain); err != nil {
			return err
		}
	}
	c.logf("bridge %s at %s, pods on %s, forwarding off the machine dropped", c.Bridge, c.BridgeAddress, c.podSubnet())
	return c.writeCNIConfig()
}

// writeCNIConfig writes containerd's CNI network: the bridge plugin with
// host-local addresses and only the two routes above.
func (c *Config) writeCNIConfig() error {
	confDir := c.dir("cni", "net.d")
	binDir := c.dir("cni", "bin")
	for _, d := range []string{confDir, binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// containerd looks the plugins up by name in its bin directory.
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		link := filepath.Join(binDir, p)
		_ = os.Remove(link)
		if err := os.Symlink(c.bin(p), link); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "jobset-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}]
      }
    }
  ]
}
`, c.Bridge, c.dir("cni", "ipam"), c.podSubnet(), c.hostIP(), c.ServiceCIDR)
	return os.WriteFile(filepath.Join(confDir, "10-jobset-local.conflist"), []byte(conf), 0o644)
}

func (c *Config) networkDown() error {
	var errs []string
	// kube-proxy's own chains and rules.
	if _, err := os.Stat(c.bin("kube-proxy")); err == nil {
		out, err := exec.Command(c.bin("kube-proxy"), "--cleanup", "--v=0").CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Sprintf("kube-proxy --cleanup: %v: %s", err, strings.TrimSpace(string(out))))
		}
	}
	removeKubeletChains()
	for run("iptables", "-w", "-C", "FORWARD", "-j", guardChain) == nil {
		if err := run("iptables", "-w", "-D", "FORWARD", "-j", guardChain); err != nil {
			errs = append(errs, err.Error())
			break
		}
	}
	if run("iptables", "-w", "-F", guardChain) == nil {
		if err := run("iptables", "-w", "-X", guardChain); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if _, err := net.InterfaceByName(c.Bridge); err == nil {
		if err := run("ip", "link", "del", c.Bridge); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if data, err := os.ReadFile(c.dir("sysctl-saved")); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			if err := os.WriteFile(filepath.Join("/proc/sys", f[0]), []byte(f[1]), 0o644); err != nil {
				errs = append(errs, err.Error())
			}
		}
		_ = os.Remove(c.dir("sysctl-saved"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// removeKubeletChains removes the chains the kubelet makes for itself
// (kube-proxy's own go with --cleanup): a canary in each table, a hint, and
// a firewall rule against non-local traffic to 127.0.0.0/8.
func removeKubeletChains() {
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			for run(cmd, "-w", "-C", hook, "-j", "KUBE-FIREWALL") == nil {
				if run(cmd, "-w", "-D", hook, "-j", "KUBE-FIREWALL") != nil {
					break
				}
			}
		}
		for _, tc := range [][2]string{{"filter", "KUBE-FIREWALL"}, {"filter", "KUBE-KUBELET-CANARY"},
			{"nat", "KUBE-KUBELET-CANARY"}, {"mangle", "KUBE-KUBELET-CANARY"}, {"mangle", "KUBE-IPTABLES-HINT"}} {
			if run(cmd, "-w", "-t", tc[0], "-F", tc[1]) == nil {
				_ = run(cmd, "-w", "-t", tc[0], "-X", tc[1])
			}
		}
	}
}

// dialable reports whether a TCP server accepts connections at addr.
func dialable(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}
