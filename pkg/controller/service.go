package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// constructHeadlessService builds the Service giving the JobSet's pods
// stable DNS names under its subdomain.
func constructHeadlessService(js *jobset.JobSet) *corev1.Service {
	publish := true
	if js.Spec.Network != nil {
		publish = ptr.Deref(js.Spec.Network.PublishNotReadyAddresses, true)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            subdomain(js),
			Namespace:       js.Namespace,
			Labels:          map[string]string{jobset.JobSetNameKey: js.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(js)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{jobset.JobSetNameKey: js.Name},
			PublishNotReadyAddresses: publish,
		},
	}
}

// ensureHeadlessService creates the headless Service when DNS hostnames are
// enabled and it is missing. A Service of that name owned by someone else
// is left alone.
func (c *Controller) ensureHeadlessService(ctx context.Context, js *jobset.JobSet) error {
	if !dnsHostnamesEnabled(js) {
		return nil
	}
	name := subdomain(js)
	obj, exists, err := c.svcs.GetByKey(js.Namespace + "/" + name)
	if err != nil {
		return err
	}
	if svc, ok := obj.(metav1.Object); exists && ok {
		if !isOwnedBy(svc.GetOwnerReferences(), js) {
			klog.FromContext(ctx).V(2).Info("Service exists and is not owned by this JobSet; leaving it alone", "service", name)
		}
		return nil
	}
	if c.exp.services.Has(js.Namespace, name) {
		return nil // created by an earlier sync; the cache is behind
	}
	_, err = c.kube.CoreV1().Services(js.Namespace).Create(ctx, constructHeadlessService(js), metav1.CreateOptions{})
	if err == nil {
		c.exp.services.Expect(js.Namespace, name, struct{}{})
	}
	if err == nil || apierrors.IsAlreadyExists(err) || namespaceTerminating(err) {
		return nil
	}
	c.warn(js, reasonServiceCreationFailed, err)
	return wrapf(err, "creating headless Service %s", name)
}
