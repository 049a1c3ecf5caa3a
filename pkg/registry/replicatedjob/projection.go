// Package replicatedjob serves the replicatedjobs resource and its scale
// subresource. A ReplicatedJob is not stored: every read projects it from
// one entry of a JobSet's spec.replicatedJobs, and every scale write is an
// update of that JobSet through the JobSet's own storage and strategy.
package replicatedjob

import (
	"crypto/sha1"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Resource is the qualified resource of ReplicatedJobs, used in errors.
var Resource = jobset.Resource("replicatedjobs")

// Name is the name of the ReplicatedJob of replicatedJob rj in JobSet js.
func Name(js, rj string) string { return js + "." + rj }

// SplitName splits <jobset>.<replicatedJob>. JobSet names are DNS-1035
// labels and replicatedJob names DNS-1123 labels, so neither contains a dot; a name without one,
// or with an empty part, names nothing.
func SplitName(name string) (js, rj string, ok bool) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// uidNamespace is the name space of the version-5 UUIDs of ReplicatedJobs.
var uidNamespace = [16]byte{
	0x6a, 0x0b, 0x1f, 0x52, 0x3c, 0x8e, 0x4d, 0x7a,
	0x9b, 0x21, 0x5e, 0x44, 0x0f, 0xd3, 0x97, 0xc6,
}

// UID derives the ReplicatedJob's UID from its JobSet's UID and its name: a
// name-based (version 5, SHA-1) UUID, the same on every read and every
// server, and new when the JobSet is recreated.
func UID(jobSetUID types.UID, rjName string) types.UID {
	h := sha1.New()
	h.Write(uidNamespace[:])
	h.Write([]byte(jobSetUID))
	h.Write([]byte{'/'})
	h.Write([]byte(rjName))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]))
}

// findReplicatedJob returns the index of replicatedJob rj in the JobSet's
// spec, or -1.
func findReplicatedJob(js *jobset.JobSet, rj string) int {
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == rj {
			return i
		}
	}
	return -1
}

// notFound is the 404 of a missing JobSet or replicatedJob.
func notFound(name string) error {
	return apierrors.NewNotFound(Resource, name)
}

// project builds the ReplicatedJob of spec.replicatedJobs[i] of js.
func project(js *jobset.JobSet, i int) *jobset.ReplicatedJobResource {
	rj := &js.Spec.ReplicatedJobs[i]
	out := &jobset.ReplicatedJobResource{
		ObjectMeta: metav1.ObjectMeta{
			Name:              Name(js.Name, rj.Name),
			Namespace:         js.Namespace,
			UID:               UID(js.UID, rj.Name),
			ResourceVersion:   js.ResourceVersion,
			Generation:        js.Generation,
			CreationTimestamp: js.CreationTimestamp,
			DeletionTimestamp: js.DeletionTimestamp,
			Labels:            copyMap(js.Labels),
		},
		Spec: jobset.ReplicatedJobResourceSpec{
			JobSetName:     js.Name,
			ReplicatedJob:  rj.Name,
			GroupName:      rj.GroupName,
			Replicas:       rj.Replicas,
			Parallelism:    copyInt32(rj.Template.Spec.Parallelism),
			Completions:    copyInt32(rj.Template.Spec.Completions),
			CompletionMode: rj.Template.Spec.CompletionMode,
		},
		Status: jobset.ReplicatedJobStatus{Name: rj.Name},
	}
	if js.UID != "" {
		out.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha2.SchemeGroupVersion.String(),
			Kind:       "JobSet",
			Name:       js.Name,
			UID:        js.UID,
			Controller: ptr.To(true),
		}}
	}
	if m := rj.Template.Spec.CompletionMode; m != nil {
		mode := *m
		out.Spec.CompletionMode = &mode
	}
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Name == rj.Name {
			out.Status = *s.DeepCopy()
		}
	}
	return out
}

// projectAll builds the ReplicatedJobs of js that pass the field selector.
func projectAll(js *jobset.JobSet, field fields.Selector) []jobset.ReplicatedJobResource {
	var out []jobset.ReplicatedJobResource
	for i := range js.Spec.ReplicatedJobs {
		p := project(js, i)
		if matchesFields(p, field) {
			out = append(out, *p)
		}
	}
	return out
}

// matchesFields applies a field selector on metadata.name and
// metadata.namespace.
func matchesFields(p *jobset.ReplicatedJobResource, field fields.Selector) bool {
	if field == nil || field.Empty() {
		return true
	}
	return field.Matches(fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace})
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
