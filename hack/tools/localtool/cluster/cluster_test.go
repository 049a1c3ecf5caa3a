package cluster

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testRoot is a checkout with the files FromEnv reads.
func testRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "versions.env"), []byte("# pinned\nKUBERNETES_VERSION=v1.37.2\nTRAINER_VERSION=v2.3.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hack", "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "local", "audit-policy.yaml"), []byte("kind: Policy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func testCluster(t *testing.T, env map[string]string) *Cluster {
	t.Helper()
	cfg, err := FromEnv(testRoot(t), envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(context.Background(), cfg, io.Discard)
	c.withJobSet = true
	return c
}

// The Lease duration reaches kwok, and kube-controller-manager waits 10 s
// longer than it before it calls a node unhealthy.
func TestNodeLease(t *testing.T) {
	for _, tc := range []struct{ lease, grace string }{{"", "50s"}, {"1200", "20m10s"}} {
		c := testCluster(t, map[string]string{"NODE_LEASE_SECONDS": tc.lease})
		lease := tc.lease
		if lease == "" {
			lease = "40"
		}
		if !slices.Contains(c.kwokArgs(), "--node-lease-duration-seconds="+lease) {
			t.Errorf("NODE_LEASE_SECONDS=%q: kwok %v", tc.lease, c.kwokArgs())
		}
		if !slices.Contains(c.controllerManagerArgs(), "--node-monitor-grace-period="+tc.grace) {
			t.Errorf("NODE_LEASE_SECONDS=%q: kube-controller-manager %v; want grace %s", tc.lease, c.controllerManagerArgs(), tc.grace)
		}
	}
}

func TestCountReadyUntainted(t *testing.T) {
	lines := "True \nTrue node.kubernetes.io/not-ready\nFalse \nTrue example.com/other\nUnknown node.kubernetes.io/unreachable node.kubernetes.io/not-ready\n"
	if got := countReadyUntainted(lines); got != 2 {
		t.Errorf("countReadyUntainted = %d, want 2 (the first and the fourth)", got)
	}
}

func TestDefaults(t *testing.T) {
	c := testCluster(t, nil)
	if c.LocalDir != filepath.Join(c.Root, "_output", "local") || c.BinDir != filepath.Join(c.Root, "_output", "bin") {
		t.Errorf("directories %s, %s: want the checkout's _output", c.LocalDir, c.BinDir)
	}
	if c.port("APISERVER_PORT") != 26443 || c.port("ETCD_PORT") != 26400 || c.port("JOBSET_APISERVER_PORT") != 26445 {
		t.Errorf("ports %v: want PORT_BASE 26400 plus the offsets", c.Port)
	}
	if c.Nodes != 4 || c.Zones != 2 || c.Wait.Seconds() != 120 || c.JobSet != "auto" || c.RealNode {
		t.Errorf("unexpected defaults %+v", c.Config)
	}
	if c.Versions["KUBERNETES_VERSION"] != "v1.37.2" {
		t.Errorf("versions.env not read: %v", c.Versions)
	}
}

func TestSettingsOverride(t *testing.T) {
	c := testCluster(t, map[string]string{"PORT_BASE": "23400", "KWOK_PORT": "30000", "NODES": "7", "JOBSET_APISERVER_ARGS": "--a=1  --b=2", "REAL_NODE": "yes", "LOCAL_DIR": "rel"})
	if c.port("ETCD_PORT") != 23400 || c.port("KWOK_PORT") != 30000 {
		t.Errorf("ports %v", c.Port)
	}
	if c.Nodes != 7 || !c.RealNode || strings.Join(c.JobSetAPIServerArgs, "|") != "--a=1|--b=2" {
		t.Errorf("settings not read: %+v", c.Config)
	}
	wd, _ := os.Getwd()
	if c.LocalDir != filepath.Join(wd, "rel") {
		t.Errorf("a relative LOCAL_DIR is %s; want it under the working directory", c.LocalDir)
	}
}

// Every bad value is refused, naming its variable; nothing starts.
func TestBadSettings(t *testing.T) {
	_, err := FromEnv(testRoot(t), envOf(map[string]string{
		"NODES": "many", "ZONES": "27", "JOBSET_APISERVERS": "5", "REAL_NODE": "maybe", "NODE_LEASE_SECONDS": "5", "NODE_STATUS_SECONDS": "0",
		"JOBSET": "sometimes", "NODE_BRIDGE_ADDRESS": "10.88.0.0/24", "SERVICE_CIDR": "10.96.0.1/16", "APISERVER_PORT": "70000",
		"JOBSET_CONTROLLER_ENV": "GOGC=25 novalue", "JOBSET_APISERVER_ENV": "=50", "AUDIT_POLICY": "/nonexistent/policy.yaml",
	}))
	if err == nil {
		t.Fatal("bad settings were accepted")
	}
	for _, name := range []string{"NODES", "ZONES", "JOBSET_APISERVERS", "REAL_NODE", "NODE_LEASE_SECONDS", "NODE_STATUS_SECONDS", "JOBSET must", "NODE_BRIDGE_ADDRESS", "SERVICE_CIDR", "APISERVER_PORT", "JOBSET_CONTROLLER_ENV", "JOBSET_APISERVER_ENV", "AUDIT_POLICY"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s:\n%v", name, err)
		}
	}
	if _, err := FromEnv(testRoot(t), envOf(map[string]string{"WITH_TRAINER": "1", "JOBSET": "0"})); err == nil {
		t.Error("Trainer without the JobSet components was accepted")
	}
}

// Every program's flags name real ports (an unknown port name reads as 0)
// and paths inside the cluster's directories.
func TestComponentFlags(t *testing.T) {
	c := testCluster(t, map[string]string{"JOBSET_APISERVERS": "3", "JOBSET_CONTROLLERS": "2", "WITH_KEDA": "1", "WITH_TRAINER": "1"})
	flags := map[string][]string{
		"etcd": c.etcdArgs(), "kube-apiserver": c.kubeAPIServerArgs(), "kube-controller-manager": c.controllerManagerArgs(),
		"kube-scheduler": c.schedulerArgs(), "kwok": c.kwokArgs(), "metrics-server": c.metricsServerArgs(),
		"jobset-apiserver-2": c.jobSetAPIServerArgs(2), "jobset-controller-1": c.jobSetControllerArgs(1),
		"keda-operator": c.kedaOperatorArgs(), "keda-adapter": c.kedaAdapterArgs(),
	}
	zeroPort := regexp.MustCompile(`(:|port=)0$`)
	for name, args := range flags {
		if args[0] != c.bin(strings.TrimSuffix(strings.TrimSuffix(name, "-1"), "-2")) {
			t.Errorf("%s runs %s", name, args[0])
		}
		for _, a := range args[1:] {
			if zeroPort.MatchString(a) {
				t.Errorf("%s: flag %s has port 0 (an unknown port name)", name, a)
			}
			// Paths (flag values or separate words) stay in the checkout.
			_, v, _ := strings.Cut(a, "=")
			if strings.HasPrefix(v, "/") && !strings.HasPrefix(v, c.Root) || strings.HasPrefix(a, "/") && !strings.HasPrefix(a, c.Root) {
				t.Errorf("%s: flag %s points outside the checkout", name, a)
			}
		}
	}
	api := strings.Join(c.jobSetAPIServerArgs(2), " ")
	if !strings.Contains(api, "--secure-port=26463") || !strings.Contains(api, "--etcd-servers=https://127.0.0.1:26400") || strings.Contains(api, "embedded") {
		t.Errorf("replica 2 of 3: want port +63 on the cluster's etcd: %s", api)
	}
	if one := strings.Join(testCluster(t, nil).jobSetAPIServerArgs(0), " "); !strings.Contains(one, "--embedded-etcd-dir=") || !strings.Contains(one, "--secure-port=26445") {
		t.Errorf("a single replica: want its embedded etcd on the jobset-apiserver port: %s", one)
	}
	ctrl := strings.Join(c.jobSetControllerArgs(1), " ")
	if !strings.Contains(ctrl, "--health-addr=127.0.0.1:26470") || !strings.Contains(ctrl, "--secure-metrics-bind-address=127.0.0.1:26472") {
		t.Errorf("standby 1: want ports +70..+72: %s", ctrl)
	}
	kube := strings.Join(c.kubeAPIServerArgs(), " ")
	if !strings.Contains(kube, "--audit-policy-file="+filepath.Join(c.Root, "hack", "local", "audit-policy.yaml")) {
		t.Errorf("the default audit policy is the checkout's: %s", kube)
	}
	if !strings.Contains(kube, "--endpoint-reconciler-type=none") {
		t.Errorf("without a real node nothing uses the kubernetes Service: %s", kube)
	}
	if kube := strings.Join(testCluster(t, map[string]string{"REAL_NODE": "1"}).kubeAPIServerArgs(), " "); !strings.Contains(kube, "--advertise-address=10.88.0.1") {
		t.Errorf("with a real node kube-apiserver is advertised on the bridge: %s", kube)
	}
}

// Ports are checked before anything starts: the components of a full
// configuration claim distinct ports.
func TestComponentsClaimDistinctPorts(t *testing.T) {
	c := testCluster(t, map[string]string{"JOBSET_APISERVERS": "4", "JOBSET_CONTROLLERS": "4", "WITH_KEDA": "1", "WITH_TRAINER": "1", "REAL_NODE": "1"})
	seen := map[int]string{}
	names := map[string]bool{}
	for _, comp := range c.components() {
		for port, what := range comp.ports {
			if other, ok := seen[port]; ok {
				t.Errorf("port %d is both %s and %s", port, other, what)
			}
			seen[port] = what
		}
		for _, n := range comp.names {
			names[n] = true
		}
	}
	if len(seen) != 2+1+2+1+1+1+4+12+3+5 {
		t.Errorf("%d ports claimed: %v", len(seen), seen)
	}
	// Down must know every program Up may start.
	for n := range names {
		known := false
		for _, s := range append(append([]string{}, stopOrder...), nodeComponents...) {
			known = known || s == n
		}
		if !known {
			t.Errorf("%s is started but not in the stop order", n)
		}
	}
}

func TestFakeNodes(t *testing.T) {
	c := testCluster(t, map[string]string{"NODES": "5", "NODES_PER_RACK": "2", "NODES_PER_POOL": "3", "ZONES": "2"})
	data, err := json.Marshal(c.fakeNodes())
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string
				Labels      map[string]string
				Annotations map[string]string
			}
			Status struct{ Allocatable map[string]string }
		}
	}
	if err := json.Unmarshal([]byte(`{"items":`+string(data)+`}`), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 {
		t.Fatalf("want 5 nodes: %s", data)
	}
	want := []struct{ zone, rack, pool string }{
		{"zone-a", "rack-0", "pool-0"}, {"zone-a", "rack-0", "pool-0"}, {"zone-b", "rack-1", "pool-0"},
		{"zone-b", "rack-1", "pool-1"}, {"zone-a", "rack-2", "pool-1"},
	}
	for i, n := range list.Items {
		l := n.Metadata.Labels
		if l["topology.kubernetes.io/zone"] != want[i].zone || l["topology.jobset.x-k8s.io/rack"] != want[i].rack || l["cloud.google.com/gke-nodepool"] != want[i].pool {
			t.Errorf("node %d labels %v; want %v", i, l, want[i])
		}
		if a := n.Metadata.Annotations; a["node-heartbeat.stage.kwok.x-k8s.io/delay"] != "4m0s" || a["node-heartbeat.stage.kwok.x-k8s.io/jitter-delay"] != "5m0s" {
			t.Errorf("node %d heartbeat annotations %v; want every 240 to 300 s (NODE_STATUS_SECONDS' default)", i, a)
		}
		if n.Metadata.Annotations["kwok.x-k8s.io/node"] != "fake" || n.Status.Allocatable["pods"] != "110" {
			t.Errorf("node %d is not a kwok node with the allocatable: %+v", i, n)
		}
	}
}

func TestPatchWebhooks(t *testing.T) {
	in := `{"kind":"List","items":[
	  {"kind":"ValidatingWebhookConfiguration","metadata":{"name":"v"},"webhooks":[
	    {"name":"a","clientConfig":{"service":{"name":"svc","namespace":"system"}}},
	    {"name":"b","clientConfig":{"service":{"name":"svc","namespace":"system","port":443}}}]},
	  {"kind":"MutatingWebhookConfiguration","metadata":{"name":"m"},"webhooks":[
	    {"name":"c","clientConfig":{"service":{"name":"svc"}}}]}]}`
	out, err := patchWebhooks([]byte(in), "kubeflow-system", 26480, "Q0E=")
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Count(s, `"port":26480`) != 3 || strings.Count(s, `"caBundle":"Q0E="`) != 3 || strings.Count(s, `"namespace":"kubeflow-system"`) != 3 || strings.Contains(s, "443") {
		t.Errorf("not every webhook points at the local port and CA: %s", s)
	}
	// kubectl may print the objects one after the other.
	two := `{"kind":"ValidatingWebhookConfiguration","webhooks":[{"name":"a","clientConfig":{"service":{"name":"s"}}}]}
{"kind":"Service","metadata":{"name":"s","namespace":"system"}}`
	out, err = patchWebhooks([]byte(two), "kubeflow-system", 26480, "Q0E=")
	if err != nil || strings.Count(string(out), `"namespace":"kubeflow-system"`) != 2 || !strings.Contains(string(out), `"kind":"List"`) {
		t.Errorf("a stream of objects: %s, %v", out, err)
	}
	if _, err := patchWebhooks([]byte(`{"kind":"List","items":[]}`), "ns", 1, "x"); err == nil {
		t.Error("manifests without webhooks were accepted")
	}
	if _, err := patchWebhooks([]byte(`{"kind":"ValidatingWebhookConfiguration","webhooks":[{"name":"u","clientConfig":{"url":"https://x"}}]}`), "ns", 1, "x"); err == nil {
		t.Error("a webhook without a Service was accepted")
	}
}

// The env file has what the tests and the docs read from it.
func TestEnvFile(t *testing.T) {
	c := testCluster(t, map[string]string{"WITH_KEDA": "1"})
	env := c.envFile()
	for _, want := range []string{
		"export KUBECONFIG=" + c.adminKubeconfig() + "\n", "export PATH=" + c.BinDir + ":${PATH}\n",
		"API_URL=https://127.0.0.1:26443\n", "JOBSET_CONTROLLER_METRICS_PORT=26448\n", "JOBSET_CONTROLLER_SECURE_METRICS_PORT=26449\n",
		"WITH_JOBSET=1\n", "WITH_KEDA=1\n", "KEDA_ADAPTER_PORT=26487\n", "REAL_NODE=0\n", "NODE_BRIDGE_ADDRESS=10.88.0.1/24\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("env file lacks %q:\n%s", want, env)
		}
	}
}

func TestRender(t *testing.T) {
	c := testCluster(t, nil)
	for _, f := range []struct{ path, body string }{
		{filepath.Join(c.Root, "artifacts", "local", "ok.yaml"), "port: @@JOBSET_APISERVER_PORT@@\ncaBundle: @@CA_BUNDLE@@\n"},
		{filepath.Join(c.Root, "artifacts", "local", "bad.yaml"), "port: @@NO_SUCH_PORT@@\n"},
		{c.pki("ca") + ".crt", "CA"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.render("ok.yaml")
	if err != nil || string(out) != "port: 26445\ncaBundle: Q0E=\n" {
		t.Errorf("render = %q, %v", out, err)
	}
	if _, err := c.render("bad.yaml"); err == nil || !strings.Contains(err.Error(), "@@NO_SUCH_PORT@@") {
		t.Errorf("an unknown placeholder: %v", err)
	}
}

// The real manifests of artifacts/local use only the placeholders render
// fills.
func TestLocalManifestsRender(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "artifacts", "local", "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no manifests in %s/artifacts/local", root)
	}
	cfg, err := FromEnv(root, envOf(map[string]string{"LOCAL_DIR": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(context.Background(), cfg, io.Discard)
	if err := os.MkdirAll(c.path("pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.pki("ca")+".crt", []byte("CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := c.render(filepath.Base(f)); err != nil {
			t.Error(err)
		}
	}
}
