// Package protobuf runs the protobuf-versus-JSON comparisons against an
// in-process server.
package protobuf

import (
	"strings"
	"testing"

	"github.com/nativejobset/jobset/test/integration/framework"
	"github.com/nativejobset/jobset/test/protobufcompare"
)

func TestProtobuf(t *testing.T) {
	s := framework.StartServer(t)
	for _, c := range protobufcompare.Cases {
		t.Run(c.Name, func(t *testing.T) {
			pb, seen, js := protobufcompare.Clients(t, s.Config)
			c.Run(t, pb, js, "pb-"+strings.ToLower(c.Name))
			seen.OnlyProtobuf(t)
		})
	}
}
