package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// The kubelet, on cgroup v1 with the cgroupfs driver, under a cgroup root of
// its own (so that Down finds every container process), registering a Node
// that carries RoleKey as label and NoSchedule taint.

func (c *Config) cgroupRoot() string { return "/" + c.Name }

func (c *Config) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only; kubelet 1.35+ refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
tlsCertFile: %q
tlsPrivateKeyFile: %q
containerRuntimeEndpoint: unix://%s
clusterDNS: [%q]
clusterDomain: %q
resolvConf: %q
podLogsDir: %q
volumePluginDir: %q
registerWithTaints:
- key: %q
  value: %q
  effect: NoSchedule
failSwapOn: false
# The images here cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A shared machine's disk may be fuller than the defaults allow.
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
maxPods: 110
`, c.cgroupRoot(), c.hostIP(), c.KubeletPort, c.KubeletHealthPort,
		c.pki("ca.crt"), c.pki("node-kubelet-serving.crt"), c.pki("node-kubelet-serving.key"),
		c.containerdSocket(), c.hostIP(), c.ClusterDomain, c.dir("resolv.conf"),
		c.dir("pod-logs"), c.dir("volume-plugins"), RoleKey, RoleValue)
}

func (c *Config) startKubelet() error {
	for _, d := range []string{c.dir("kubelet"), c.dir("pod-logs"), c.dir("volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.makeCgroupRoot(); err != nil {
		return err
	}
	// Pods with dnsPolicy Default get this file: the cluster DNS, which
	// answers nothing outside the cluster.
	if err := os.WriteFile(c.dir("resolv.conf"), []byte("nameserver "+c.hostIP()+"\n"), 0o644); err != nil {
		return err
	}
	conf := c.dir("kubelet-config.yaml")
	if err := os.WriteFile(conf, []byte(c.kubeletConfig()), 0o644); err != nil {
		return err
	}
	if err := c.start(proc.Process{Name: kubelet, Argv: []string{c.bin("kubelet"),
		"--config=" + conf,
		"--kubeconfig=" + c.kubeconfig(kubelet),
		"--root-dir=" + c.dir("kubelet"),
		"--hostname-override=" + c.Name,
		"--node-ip=" + c.hostIP(),
		"--node-labels=" + RoleKey + "=" + RoleValue,
		"--v=1",
	}}); err != nil {
		return err
	}
	return c.waitFor(kubelet, "node "+c.Name+" Ready", func() error {
		out, err := c.kubectl("", "get", "node", c.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("node %s Ready=%q", c.Name, strings.TrimSpace(out))
		}
		return nil
	})
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy; a
// cpuset cgroup needs its cpus and mems before it can hold tasks.
func (c *Config) makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, c.cgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers,
// named ones, and a hybrid v2 mount).
func cgroupHierarchies() []string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out
}

// kubectl runs the cluster's kubectl as the admin, with stdin as its input
// (none when empty).
func (c *Config) kubectl(stdin string, args ...string) (string, error) {
	args = append([]string{"--kubeconfig", filepath.Join(c.LocalDir, "kubeconfig"), "--request-timeout=10s"}, args...)
	cmd := exec.Command(c.bin("kubectl"), args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
