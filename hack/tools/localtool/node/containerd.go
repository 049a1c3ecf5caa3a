package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nativejobset/jobset/hack/tools/localtool/proc"
)

// containerd with Debian's runc and the cgroupfs driver. Every path it
// writes is below data/node (the CRI's network namespaces included), except
// the shims' sockets, which containerd keeps under /run/containerd/s.

func (c *Config) containerdSocket() string { return c.dir("run", "containerd.sock") }

func (c *Config) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %q
state = %q
# Plugins this node has no use for (and whose defaults write outside the
# node's directories).
disabled_plugins = [
  "io.containerd.nri.v1.nri",
  "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins.'io.containerd.internal.v1.opt']
  path = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    # Nothing can be pulled here: the sandbox image is imported.
    sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  # This machine denies lowering oom_score_adj (no CAP_SYS_RESOURCE).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, c.dir("containerd", "root"), c.dir("containerd", "state"),
		c.containerdSocket(), c.containerdSocket()+".ttrpc",
		c.dir("containerd", "opt"), SandboxImage,
		c.Runc, c.dir("runc"),
		c.dir("cni", "bin"), c.dir("cni", "net.d"))
}

func (c *Config) startContainerd() error {
	if len(c.containerdSocket()) > 100 {
		return fmt.Errorf("containerd's socket path %s is too long for a unix socket; use a shorter LOCAL_DIR", c.containerdSocket())
	}
	for _, d := range []string{c.dir("run"), c.dir("containerd"), c.dir("runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	conf := c.dir("containerd", "config.toml")
	if err := os.WriteFile(conf, []byte(c.containerdConfig()), 0o644); err != nil {
		return err
	}
	// containerd finds its shim by name on PATH.
	path := c.BinDir + ":" + os.Getenv("PATH")
	if err := c.start(proc.Process{Name: containerd, Argv: []string{c.bin("containerd"), "--config", conf}, Env: []string{"PATH=" + path}}); err != nil {
		return err
	}
	return c.waitFor(containerd, "containerd", func() error {
		_, err := c.ctr("version")
		return err
	})
}

// ctr runs containerd's client in the CRI's namespace.
func (c *Config) ctr(args ...string) (string, error) {
	args = append([]string{"--address", c.containerdSocket(), "--namespace", "k8s.io"}, args...)
	out, err := exec.Command(c.bin("ctr"), args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImages loads the given archives; the kubelet never pulls (every
// pod here says imagePullPolicy IfNotPresent or Never).
func (c *Config) importImages() error {
	for _, f := range c.Images {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		if _, err := c.ctr("images", "import", "--local", "--platform", "linux/amd64", f); err != nil {
			return err
		}
		c.logf("imported %s", filepath.Base(f))
	}
	out, err := c.ctr("images", "ls", "-q")
	if err != nil {
		return err
	}
	if !strings.Contains(out, SandboxImage) {
		return fmt.Errorf("the sandbox image %s is not in containerd: import its archive with -images", SandboxImage)
	}
	return nil
}
