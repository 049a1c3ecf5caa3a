// Package trainer checks that Kubeflow Trainer's controller manager, built
// from the pinned github.com/kubeflow/trainer/v2 (hack/tools/trainer) and run
// against the local cluster, drives JobSets served by jobset-apiserver:
// a TrainJob makes Trainer server-side-apply a JobSet, the JobSet's Jobs run
// on kwok nodes and complete, and the TrainJob completes.
//
// TrainJobs are handled with the dynamic client, so that this module does not
// depend on Trainer's Go types.
package trainer

import (
	"os"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/nativejobset/jobset/test/localcluster"
)

var (
	stack *localcluster.Cluster
	dyn   dynamic.Interface
	disc  discovery.DiscoveryInterface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	o := localcluster.Options{
		Prefix:   "TRAINER_",
		Dir:      "_output/trainer",
		PortBase: 22400,
		Nodes:    4,
		Env:      []string{"WITH_TRAINER=1"},
	}
	return localcluster.RunTests(m, o, func(c *localcluster.Cluster) (err error) {
		stack = c
		if dyn, err = dynamic.NewForConfig(c.Config); err != nil {
			return err
		}
		disc, err = discovery.NewDiscoveryClientForConfig(c.Config)
		return err
	})
}
