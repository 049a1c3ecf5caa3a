package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/claims"
)

// claimName is the name of the claim made from a template: <claim>-<jobset>.
func claimName(template, js string) string {
	return claims.Name(template, js)
}

func retained(p *jobset.VolumeClaimPolicy) bool {
	return p.RetentionPolicy != nil && p.RetentionPolicy.WhenDeleted != nil &&
		*p.RetentionPolicy.WhenDeleted == jobset.RetentionPolicyRetain
}

// constructClaim builds the claim of one volumeClaimPolicies template. It
// is owned by the JobSet only when it is deleted with it.
func constructClaim(js *jobset.JobSet, p *jobset.VolumeClaimPolicy, t *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        claimName(t.Name, js.Name),
			Namespace:   js.Namespace,
			Labels:      mergeInto(mergeInto(nil, t.Labels), map[string]string{jobset.JobSetNameKey: js.Name}),
			Annotations: mergeInto(nil, t.Annotations),
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if !retained(p) {
		pvc.OwnerReferences = []metav1.OwnerReference{ownerRef(js)}
	}
	return pvc
}

// ensureClaims creates the missing shared claims before any Job. An
// existing claim of the same name (say, retained from an earlier JobSet of
// that name) is used as it is.
func (c *Controller) ensureClaims(ctx context.Context, js *jobset.JobSet) error {
	var errs []error
	for i := range js.Spec.VolumeClaimPolicies {
		p := &js.Spec.VolumeClaimPolicies[i]
		for j := range p.Templates {
			t := &p.Templates[j]
			name := claimName(t.Name, js.Name)
			if existing, err := c.pvcLister.PersistentVolumeClaims(js.Namespace).Get(name); err == nil {
				if !claims.SpecMatches(existing, t) {
					klog.FromContext(ctx).V(2).Info("Existing claim differs from its template; using it as it is", "claim", name)
				}
				continue
			} else if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			_, err := c.kube.CoreV1().PersistentVolumeClaims(js.Namespace).Create(ctx, constructClaim(js, p, t), metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) && !namespaceTerminating(err) {
				c.warn(js, reasonPVCCreationFailed, err)
				errs = append(errs, wrapf(err, "creating claim %s", name))
			}
		}
	}
	return errors.Join(errs...)
}

// injectClaimVolumes adds a volume for each shared claim that a container
// of the pod mounts and that the pod does not already define.
func injectClaimVolumes(js *jobset.JobSet, pod *corev1.PodSpec) {
	if len(js.Spec.VolumeClaimPolicies) == 0 {
		return
	}
	mounted := map[string]bool{}
	for _, list := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for _, ctr := range list {
			for _, m := range ctr.VolumeMounts {
				mounted[m.Name] = true
			}
		}
	}
	defined := map[string]bool{}
	for _, v := range pod.Volumes {
		defined[v.Name] = true
	}
	for i := range js.Spec.VolumeClaimPolicies {
		for _, t := range js.Spec.VolumeClaimPolicies[i].Templates {
			if !mounted[t.Name] || defined[t.Name] {
				continue
			}
			pod.Volumes = append(pod.Volumes, corev1.Volume{
				Name: t.Name,
				VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(t.Name, js.Name)},
				},
			})
			defined[t.Name] = true
		}
	}
}
