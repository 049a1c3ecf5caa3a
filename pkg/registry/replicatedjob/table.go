package replicatedjob

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the ReplicatedJob: <jobset>.<replicatedJob>."},
	{Name: "JobSet", Type: "string", Description: "The JobSet the replicatedJob belongs to."},
	{Name: "Replicas", Type: "integer", Description: "Number of child Jobs."},
	{Name: "Parallelism", Type: "string", Description: "Pods per child Job (the unit of the scale subresource)."},
	{Name: "Ready", Type: "integer", Description: "Ready child Jobs."},
	{Name: "Succeeded", Type: "integer", Description: "Child Jobs that completed."},
	{Name: "Failed", Type: "integer", Description: "Child Jobs that failed."},
	{Name: "Age", Type: "date", Description: "Time since the JobSet was created."},
}

// convertToTable renders ReplicatedJobs for `kubectl get rj`.
func convertToTable(obj runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: tableColumns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	var items []jobset.ReplicatedJobResource
	switch t := obj.(type) {
	case *jobset.ReplicatedJobResource:
		items = []jobset.ReplicatedJobResource{*t}
	case *jobset.ReplicatedJobResourceList:
		items = t.Items
	default:
		return nil, fmt.Errorf("cannot render %T as a ReplicatedJob table", obj)
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for i := range items {
		rj := &items[i]
		parallelism := "<unset>"
		if rj.Spec.Parallelism != nil {
			parallelism = fmt.Sprint(*rj.Spec.Parallelism)
		}
		age := "<unknown>"
		if !rj.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(metav1.Now().Sub(rj.CreationTimestamp.Time))
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Object: runtime.RawExtension{Object: rj},
			Cells: []interface{}{
				rj.Name,
				rj.Spec.JobSetName,
				int64(rj.Spec.Replicas),
				parallelism,
				int64(rj.Status.Ready),
				int64(rj.Status.Succeeded),
				int64(rj.Status.Failed),
				age,
			},
		})
	}
	return table, nil
}
