package node

import (
	"os"
	"strings"
	"testing"
	"time"
)

func testConfig(t *testing.T) *Config {
	t.Helper()
	c, err := parseFlags("up", []string{"-local-dir", t.TempDir(), "-bin-dir", "/usr/bin", "-port-base", "20000"})
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = os.Stderr
	c.Wait = 5 * time.Second
	return c
}

func TestParseFlags(t *testing.T) {
	c := testConfig(t)
	if c.APIServerPort != 20043 || c.KubeletPort != 20090 || c.DNSMetricsPort != 20096 {
		t.Errorf("ports from -port-base 20000: apiserver %d kubelet %d dns metrics %d", c.APIServerPort, c.KubeletPort, c.DNSMetricsPort)
	}
	if c.hostIP() != "10.88.0.1" || c.podSubnet() != "10.88.0.0/24" {
		t.Errorf("host %s, pod subnet %s", c.hostIP(), c.podSubnet())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bin-dir", "/x"}, "-local-dir and -bin-dir are required"},
		{[]string{"-local-dir", "/x", "-bin-dir", "/x", "-bridge-address", "10.88.0.0/24"}, "the subnet's own address"},
		{[]string{"-local-dir", "/x", "-bin-dir", "/x", "-bridge-address", "10.88.0.1"}, "with its prefix"},
		{[]string{"-local-dir", "/x", "-bin-dir", "/x", "-bridge-address", "fd00::1/64"}, "IPv4"},
		{[]string{"-local-dir", "/x", "-bin-dir", "/x", "-service-cidr", "nonsense"}, "-service-cidr"},
	} {
		_, err := parseFlags("up", tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%v) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// The generated configurations hold what this machine needs and keep every
// path under the node's directory.
func TestConfigs(t *testing.T) {
	c := testConfig(t)
	cd := c.containerdConfig()
	for _, want := range []string{
		"restrict_oom_score_adj = true",
		"SystemdCgroup = false",
		"netns_mounts_under_state_dir = true",
		`sandbox = "` + SandboxImage + `"`,
		`address = "` + c.dir("run", "containerd.sock") + `"`,
	} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %q", want)
		}
	}
	kc := c.kubeletConfig()
	for _, want := range []string{"failCgroupV1: false", "cgroupDriver: cgroupfs", `cgroupRoot: "/jobset-node-0"`,
		`address: "10.88.0.1"`, "healthzBindAddress: 127.0.0.1", "readOnlyPort: 0", `clusterDNS: ["10.88.0.1"]`,
		`key: "jobset.local/real-node"`, "effect: NoSchedule", `nodefs.available: "1%"`} {
		if !strings.Contains(kc, want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, kc)
		}
	}
	kp := c.kubeProxyConfig()
	for _, want := range []string{"mode: iptables", "healthzBindAddress: 127.0.0.1:20092", "metricsBindAddress: 127.0.0.1:20093",
		`nodePortAddresses: ["10.88.0.0/24"]`, "maxPerCore: 0"} {
		if !strings.Contains(kp, want) {
			t.Errorf("kube-proxy config lacks %q", want)
		}
	}
	cf := c.corefile()
	if strings.Count(cf, "bind 10.88.0.1") != 2 || !strings.Contains(cf, "health 127.0.0.1:20094") || !strings.Contains(cf, "rcode NXDOMAIN") {
		t.Errorf("Corefile must bind the bridge address only, keep health on loopback and answer nothing outside the cluster:\n%s", cf)
	}
	if err := c.writeCNIConfig(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(c.dir("cni", "net.d", "10-jobset-local.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"isDefaultGateway": false`, `"ipMasq": false`, `"dst": "10.96.0.0/16"`, `"subnet": "10.88.0.0/24"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("CNI config lacks %s:\n%s", want, data)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/a\040b/c\011d`); got != "/a b/c\td" {
		t.Errorf("unescapeMount = %q", got)
	}
}
