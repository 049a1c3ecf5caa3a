// Package claims names the shared claims of volumeClaimPolicies and says
// when an existing claim matches its template. The controller and the API
// server's admission use it alike.
package claims

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Name is the name of the claim made from a template: <claim>-<jobset>.
func Name(template, jobSet string) string {
	return template + "-" + jobSet
}

// SpecMatches reports whether an existing claim is what the template asks
// for: the same access modes and requests, and the storage class and volume
// mode where the template sets them. What the cluster fills in (the bound
// volume, a default storage class, the default volume mode) does not count.
func SpecMatches(existing *corev1.PersistentVolumeClaim, template *corev1.PersistentVolumeClaim) bool {
	a, b := existing.Spec, template.Spec
	if !apiequality.Semantic.DeepEqual(a.AccessModes, b.AccessModes) || !apiequality.Semantic.DeepEqual(a.Resources.Requests, b.Resources.Requests) {
		return false
	}
	if b.StorageClassName != nil && (a.StorageClassName == nil || *a.StorageClassName != *b.StorageClassName) {
		return false
	}
	return b.VolumeMode == nil || (a.VolumeMode != nil && *a.VolumeMode == *b.VolumeMode)
}
