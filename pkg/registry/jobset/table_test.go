package jobset

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// The Ready column sums int32 counts of several replicatedJobs; the sums
// must not wrap around.
func TestTableReadyDoesNotOverflow(t *testing.T) {
	const big = 1<<31 - 1
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "huge"},
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{
			{Name: "a", Replicas: big}, {Name: "b", Replicas: big},
		}},
		Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
			{Name: "a", Ready: big}, {Name: "b", Ready: 1},
		}},
	}
	table, err := tableConvertor{}.ConvertToTable(context.Background(), js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := table.Rows[0].Cells[6], "2147483648/4294967294"; got != want {
		t.Fatalf("Ready = %v, want %s", got, want)
	}
}
