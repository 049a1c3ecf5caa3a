package controller

import (
	"encoding/json"
	"k8s.io/utils/ptr"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

func TestStatusPatchCarriesChangesAndPreconditions(t *testing.T) {
	cached := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "41", UID: "u-1"}}
	cached.Status.TerminalState = "Completed"
	cached.Status.Restarts = 2
	updated := cached.DeepCopy()
	updated.Status.TerminalState = ""
	updated.Status.ExecutionAttempts = ptr.To[int32](3)

	raw, err := statusPatch(cached, updated)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata map[string]any `json:"metadata"`
		Status   map[string]any `json:"status"`
	}
	if err := json.Unmarshal(raw, &patch); err != nil {
		t.Fatalf("patch %s: %v", raw, err)
	}
	if patch.Metadata["resourceVersion"] != "41" || patch.Metadata["uid"] != "u-1" {
		t.Errorf("preconditions = %v, want resourceVersion 41 and uid u-1", patch.Metadata)
	}
	if v, ok := patch.Status["terminalState"]; !ok || v != nil {
		t.Errorf("a cleared field must be sent as null: %s", raw)
	}
	if patch.Status["executionAttempts"] != float64(3) {
		t.Errorf("executionAttempts = %v, want 3: %s", patch.Status["executionAttempts"], raw)
	}
	if _, ok := patch.Status["restarts"]; ok {
		t.Errorf("an unchanged field is in the patch: %s", raw)
	}
}
