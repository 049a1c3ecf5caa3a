// Package faults kills components of a local cluster of its own while it
// works — the jobset-controller leader during a fan-out and during restarts,
// one of two jobset-apiserver replicas during writes, and a random
// component every interval of a soak — and checks afterwards that no
// acknowledged write was lost and that every JobSet has exactly the Jobs
// its spec and status say.
//
// The cluster (hack/local-up.sh, in _output/faults, ports from 23400 or
// FAULTS_PORT_BASE) runs two jobset-apiserver replicas on the cluster's etcd
// behind a loopback load balancer, and two jobset-controller processes with
// short leader-election leases.
package faults

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nativejobset/jobset/test/localcluster"
)

// The controllers' leader election; short, so that a standby takes over
// quickly, but long enough for a loaded machine to renew in time.
const (
	leaseDuration = 8 * time.Second
	renewDeadline = 6 * time.Second
	retryPeriod   = time.Second
)

var (
	apiservers  = []string{"jobset-apiserver", "jobset-apiserver-1"}
	controllers = []string{"jobset-controller", "jobset-controller-1"}
	// Components the tests kill, and start again afterwards as a
	// Deployment's ReplicaSet would.
	restartable = append(append([]string{"kube-controller-manager"}, apiservers...), controllers...)
)

// defaultPortBase is the suite's port base unless FAULTS_PORT_BASE says otherwise.
const defaultPortBase = 23400

var cl *localcluster.Cluster

// templates holds the command line of every restartable component, read
// once the cluster is up, so that a killed one can be started again.
var templates = map[string]*localcluster.Process{}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	o := localcluster.Options{
		Prefix: "FAULTS_", Dir: "_output/faults", PortBase: defaultPortBase, Nodes: 8,
		APIServers: 2, Controllers: 2,
		Env: []string{fmt.Sprintf("JOBSET_CONTROLLER_ARGS=--leader-elect-lease-duration=%s --leader-elect-renew-deadline=%s --leader-elect-retry-period=%s",
			leaseDuration, renewDeadline, retryPeriod)},
	}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) error {
		cl = c
		for _, name := range restartable {
			p, err := c.Process(name)
			if err != nil {
				return fmt.Errorf("the faults cluster lacks %s: %w", name, err)
			}
			templates[name] = p
		}
		return nil
	})
}
