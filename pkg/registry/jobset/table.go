package jobset

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// tableConvertor renders JobSets for `kubectl get`. The first columns match
// what upstream's CRD prints; -o wide adds readiness and execution attempts.
type tableConvertor struct{}

var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the JobSet."},
	{Name: "TerminalState", Type: "string", Description: "Final state of the JobSet: Completed or Failed."},
	{Name: "Restarts", Type: "string", Description: "Number of whole-JobSet restarts."},
	{Name: "Completed", Type: "string", Description: "Status of the Completed condition."},
	{Name: "Suspended", Type: "string", Description: "Whether the JobSet is suspended."},
	{Name: "Age", Type: "date", Description: "Time since the JobSet was created."},
	{Name: "Ready", Type: "string", Priority: 1, Description: "Ready child Jobs out of all child Jobs."},
	{Name: "Attempts", Type: "integer", Priority: 1, Description: "Execution attempts: failure restarts and resumes."},
}

func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: tableColumns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}

	var items []jobset.JobSet
	switch t := obj.(type) {
	case *jobset.JobSet:
		items = []jobset.JobSet{*t}
	case *jobset.JobSetList:
		items = t.Items
	default:
		return nil, fmt.Errorf("cannot render %T as a JobSet table", obj)
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for i := range items {
		table.Rows = append(table.Rows, tableRow(&items[i]))
	}
	return table, nil
}

func tableRow(js *jobset.JobSet) metav1.TableRow {
	completed := ""
	for _, c := range js.Status.Conditions {
		if c.Type == string(jobset.JobSetCompleted) {
			completed = string(c.Status)
		}
	}
	suspended := ""
	if js.Spec.Suspend != nil {
		suspended = strconv.FormatBool(*js.Spec.Suspend)
	}
	// int64: the sums of int32 counts may exceed the int32 range.
	var ready, total int64
	for _, rj := range js.Spec.ReplicatedJobs {
		total += int64(rj.Replicas)
	}
	for _, s := range js.Status.ReplicatedJobsStatus {
		ready += int64(s.Ready)
	}
	age := "<unknown>"
	if !js.CreationTimestamp.IsZero() {
		age = duration.HumanDuration(metav1.Now().Sub(js.CreationTimestamp.Time))
	}
	return metav1.TableRow{
		Object: runtime.RawExtension{Object: js},
		Cells: []interface{}{
			js.Name,
			js.Status.TerminalState,
			strconv.Itoa(int(js.Status.Restarts)),
			completed,
			suspended,
			age,
			fmt.Sprintf("%d/%d", ready, total),
			int64(ptr.Deref(js.Status.ExecutionAttempts, 0)),
		},
	}
}
