package apiserver

import (
	"context"
	"encoding/json"
	"testing"

	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/nativejobset/jobset/pkg/version"
	"github.com/nativejobset/jobset/test/integration/framework"
)

// /version answers for jobset-apiserver, not for the Kubernetes libraries.
func TestVersionEndpoint(t *testing.T) {
	s := framework.StartServer(t)
	raw, err := s.Client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	var got apimachineryversion.Info
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	want := version.Get()
	if got.GitVersion != want.Version || got.GitCommit != want.Commit || got.Platform != want.Platform {
		t.Errorf("/version = %s, want version %s, commit %s, platform %s", raw, want.Version, want.Commit, want.Platform)
	}
	if got.EmulationMinor == "" {
		t.Errorf("/version = %s: no emulation version", raw)
	}
}
