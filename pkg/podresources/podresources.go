// Package podresources holds the one pod template edit that upstream's
// KEP-1150 allows on a suspended JobSet besides the scheduling fields:
// the containers' resource requests and limits.
package podresources

import corev1 "k8s.io/api/core/v1"

// Copy sets the resource requests and limits of each container in dst to
// those of the container of the same name in src; resource claims and
// everything else stay as they are.
func Copy(dst, src []corev1.Container) {
	for i := range dst {
		for j := range src {
			if dst[i].Name == src[j].Name {
				dst[i].Resources.Requests = src[j].Resources.Requests
				dst[i].Resources.Limits = src[j].Resources.Limits
			}
		}
	}
}
