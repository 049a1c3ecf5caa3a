package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
		"--node-lease-duration-seconds=40",
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
	if c.Nodes > 0 {
		nodes, err := json.Marshal(c.fakeNodes())
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

// fakeNodes is a List of the fake nodes: NODES_PER_RACK to a rack,
// NODES_PER_POOL to a pool, racks spread over ZONES zones.
func (c *Cluster) fakeNodes() map[string]any {
	items := make([]any, 0, c.Nodes)
	allocatable := map[string]string{"cpu": c.NodeCPU, "memory": c.NodeMemory, "pods": c.NodePods}
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
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Taints []struct {
				Key string `json:"key"`
			} `json:"taints"`
		} `json:"spec"`
		conditions
	} `json:"items"`
}

// deleteExtraNodes removes fake nodes of an earlier run with more NODES.
func (c *Cluster) deleteExtraNodes() error {
	var nodes nodeList
	if err := c.getJSON(&nodes, "nodes", "-l", "type=kwok"); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		idx, err := strconv.Atoi(strings.TrimPrefix(n.Metadata.Name, "kwok-node-"))
		if err != nil || idx >= c.Nodes || !strings.HasPrefix(n.Metadata.Name, "kwok-node-") {
			if _, err := c.kubectl(nil, "delete", "node", n.Metadata.Name, "--wait=false"); err != nil {
				return err
			}
		}
	}
	return nil
}

// fakeNodesReady: every fake node Ready, and the node lifecycle controller
// has lifted its not-ready taint (it does once it saw the node Ready).
func (c *Cluster) fakeNodesReady() error {
	var nodes nodeList
	if err := c.getJSON(&nodes, "nodes", "-l", "type=kwok"); err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		if !n.is("Ready") {
			continue
		}
		tainted := false
		for _, t := range n.Spec.Taints {
			tainted = tainted || t.Key == "node.kubernetes.io/not-ready"
		}
		if !tainted {
			ready++
		}
	}
	if ready < c.Nodes {
		return fmt.Errorf("%d of %d fake nodes are Ready and untainted", ready, c.Nodes)
	}
	return nil
}
