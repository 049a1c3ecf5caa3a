package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kwok plays the kubelet of every fake node (those annotated
// kwok.x-k8s.io/node=fake); pods on them move through the stages of
// hack/local/kwok/stages.yaml.

func (c *Cluster) kwokArgs() []string {
	conf := filepath.Join(c.Root, "hack", "local", "kwok")
	return []string{c.bin("kwok"),
		"--kubeconfig=" + c.kubeconfig("kwok"),
		"--config=" + filepath.Join(conf, "kwok.yaml"),
		"--config=" + filepath.Join(conf, "stages.yaml"),
		"--config=" + filepath.Join(conf, "metrics.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(c.port("KWOK_PORT")),
		"--server-address=" + c.local("KWOK_PORT"),
		"--tls-cert-file=" + c.pki("kwok-serving") + ".crt", "--tls-private-key-file=" + c.pki("kwok-serving") + ".key",
		"--node-lease-duration-seconds=" + strconv.Itoa(c.NodeLeaseSeconds),
		"--cidr=" + c.PodCIDR,
	}
}

func (c *Cluster) startKwok() error {
	// kwok also reads ~/.kwok/kwok.yaml when it exists; a HOME of its own
	// keeps it to our stage files.
	home := c.data("kwok-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	if err := c.start("kwok", c.kwokArgs(), "HOME="+home); err != nil {
		return err
	}
	if err := c.waitFor("kwok", "kwok /healthz", c.probeTLS("https://"+c.local("KWOK_PORT")+"/healthz", "")); err != nil {
		return err
	}
	c.logf("creating %d fake nodes", c.Nodes)
	all := c.fakeNodes()
	// One kubectl per batch: each call has its own time limit.
	for start := 0; start < len(all); start += nodesPerApply {
		batch := all[start:min(start+nodesPerApply, len(all))]
		nodes, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": batch})
		if err != nil {
			return err
		}
		if err := c.apply(nodes); err != nil {
			return err
		}
	}
	if err := c.deleteExtraNodes(); err != nil {
		return err
	}
	return c.waitFor("kwok", fmt.Sprintf("%d kwok nodes Ready and untainted", c.Nodes), c.fakeNodesReady)
}

// nodesPerApply is how many fake nodes one kubectl apply creates.
const nodesPerApply = 500

// fakeNodes are the fake nodes: NODES_PER_RACK to a rack, NODES_PER_POOL to
// a pool, racks spread over ZONES zones.
func (c *Cluster) fakeNodes() []any {
	items := make([]any, 0, c.Nodes)
	allocatable := map[string]string{"cpu": c.NodeCPU, "memory": c.NodeMemory, "pods": c.NodePods}
	heartbeat := time.Duration(c.NodeStatusSeconds) * time.Second
	for i := 0; i < c.Nodes; i++ {
		rack, pool := i/c.NodesPerRack, i/c.NodesPerPool
		name := fmt.Sprintf("kwok-node-%d", i)
		items = append(items, map[string]any{
			"apiVersion": "v1",
			"kind":       "Node",
			"metadata": map[string]any{
				"name": name,
				"annotations": map[string]string{
					"kwok.x-k8s.io/node":                   "fake",
					"metrics.k8s.io/resource-metrics-path": "/metrics/nodes/" + name + "/metrics/resource",
					// hack/local/kwok/stages.yaml's node-heartbeat stage.
					"node-heartbeat.stage.kwok.x-k8s.io/delay":        heartbeat.String(),
					"node-heartbeat.stage.kwok.x-k8s.io/jitter-delay": (heartbeat * 5 / 4).String(),
				},
				"labels": map[string]string{
					"type":                             "kwok",
					"kubernetes.io/hostname":           name,
					"kubernetes.io/os":                 "linux",
					"kubernetes.io/arch":               "amd64",
					"node.kubernetes.io/instance-type": "kwok",
					"topology.kubernetes.io/region":    "local",
					"topology.kubernetes.io/zone":      "zone-" + string(rune('a'+rack%c.Zones)),
					"topology.jobset.x-k8s.io/rack":    fmt.Sprintf("rack-%d", rack),
					"cloud.google.com/gke-nodepool":    fmt.Sprintf("pool-%d", pool),
				},
			},
			"spec":   map[string]any{},
			"status": map[string]any{"allocatable": allocatable, "capacity": allocatable},
		})
	}
	return items
}

// deleteExtraNodes removes fake nodes of an earlier run with more NODES.
func (c *Cluster) deleteExtraNodes() error {
	out, err := c.kubectl(nil, "get", "nodes", "-l", "type=kwok", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(out)) {
		idx, err := strconv.Atoi(strings.TrimPrefix(name, "kwok-node-"))
		if err != nil || idx >= c.Nodes || !strings.HasPrefix(name, "kwok-node-") {
			if _, err := c.kubectl(nil, "delete", "node", name, "--wait=false"); err != nil {
				return err
			}
		}
	}
	return nil
}

// fakeNodesReady: every fake node Ready, and the node lifecycle controller
// has lifted its not-ready taint (it does once it saw the node Ready). It
// reads one line a node, not the nodes' JSON: at thousands of nodes that
// is tens of megabytes a poll.
func (c *Cluster) fakeNodesReady() error {
	out, err := c.kubectl(nil, "get", "nodes", "-l", "type=kwok", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}{"\n"}{end}`)
	if err != nil {
		return err
	}
	if ready := countReadyUntainted(string(out)); ready < c.Nodes {
		return fmt.Errorf("%d of %d fake nodes are Ready and untainted", ready, c.Nodes)
	}
	return nil
}

// countReadyUntainted counts the lines "<Ready status> <taint keys>" of
// nodes that are Ready without the not-ready taint.
func countReadyUntainted(lines string) int {
	ready := 0
	for _, line := range strings.Split(lines, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == "True" && !slices.Contains(fields[1:], "node.kubernetes.io/not-ready") {
			ready++
		}
	}
	return ready
}
