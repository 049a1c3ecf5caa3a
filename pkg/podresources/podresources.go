// Package podresources holds the one pod template edit that upstream's
// KEP-1150 allows on a suspended JobSet besides the scheduling fields:
// the containers' resource requests and limits.
package podresources

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Copy sets the resource requests and limits of each container in dst to
// those of the container of the same name in src; resource claims and
// everything else stay as they are. It reports whether anything changed.
func Copy(dst, src []corev1.Container) (changed bool) {
	for i := range dst {
		for j := range src {
			if dst[i].Name != src[j].Name {
				continue
			}
			r := &dst[i].Resources
			if !apiequality.Semantic.DeepEqual(r.Requests, src[j].Resources.Requests) ||
				!apiequality.Semantic.DeepEqual(r.Limits, src[j].Resources.Limits) {
				changed = true
			}
			r.Requests, r.Limits = src[j].Resources.Requests, src[j].Resources.Limits
		}
	}
	return changed
}
