package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// ttlRemaining returns how long a finished JobSet still has to live, and
// whether a TTL applies at all.
func ttlRemaining(js *jobset.JobSet, now time.Time) (time.Duration, bool) {
	if js.Spec.TTLSecondsAfterFinished == nil {
		return 0, false
	}
	at := finishTime(js)
	if at == nil {
		return 0, false
	}
	expiry := at.Add(time.Duration(*js.Spec.TTLSecondsAfterFinished) * time.Second)
	return expiry.Sub(now), true
}

// executeTTL deletes a finished JobSet (foreground) once its TTL expired,
// or returns when to look again.
func (c *Controller) executeTTL(ctx context.Context, js *jobset.JobSet) (time.Duration, error) {
	left, ok := ttlRemaining(js, c.clock.Now())
	if !ok {
		return 0, nil
	}
	if left > 0 {
		return left, nil
	}
	uid := js.UID
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.jsClient.JobsetV1alpha2().JobSets(js.Namespace).Delete(ctx, js.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, wrapf(err, "deleting JobSet after its TTL")
	}
	klog.FromContext(ctx).V(2).Info("Deleted JobSet after ttlSecondsAfterFinished")
	return 0, nil
}
