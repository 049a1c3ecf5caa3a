package e2e

import (
	"testing"

	"github.com/nativejobset/jobset/test/protobufcompare"
)

// TestProtobufThroughAggregation drives jobsets, jobsets/status,
// replicatedjobs and replicatedjobs/scale with a protobuf-only client
// through kube-apiserver and compares every answer with JSON.
func TestProtobufThroughAggregation(t *testing.T) {
	for _, c := range protobufcompare.Cases {
		t.Run(c.Name, func(t *testing.T) {
			pb, seen, js := protobufcompare.Clients(t, cluster.config)
			c.Run(t, pb, js, namespace(t))
			seen.OnlyProtobuf(t)
		})
	}
}
