package migrate

import (
	"context"
	"fmt"
	"slices"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Kinds of children.
const (
	kindJob     = "Job"
	kindService = "Service"
	kindPVC     = "PersistentVolumeClaim"
)

var childKinds = []string{kindJob, kindService, kindPVC}

// childIndex holds a namespace's possible children by the UIDs of their
// owners.
type childIndex map[types.UID][]Child

// listChildren lists the Jobs, Services, PVCs and objects of the extra
// child resources of a namespace once, for all of its JobSets: a list per
// JobSet would make a large cluster's run (and its windows) long.
func (m *migrator) listChildren(ctx context.Context, namespace string) (childIndex, error) {
	idx := childIndex{}
	add := func(kind, resource string, meta metav1.Object) {
		for _, r := range meta.GetOwnerReferences() {
			idx[r.UID] = append(idx[r.UID], Child{Kind: kind, Resource: resource, Name: meta.GetName(), UID: meta.GetUID(),
				Controller: ptr.Deref(r.Controller, false), BlockOwnerDeletion: ptr.Deref(r.BlockOwnerDeletion, false)})
		}
	}
	jobs, err := m.c.Kube.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Jobs in %s: %w", namespace, err)
	}
	for i := range jobs.Items {
		add(kindJob, "", &jobs.Items[i])
	}
	svcs, err := m.c.Kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Services in %s: %w", namespace, err)
	}
	for i := range svcs.Items {
		add(kindService, "", &svcs.Items[i])
	}
	pvcs, err := m.c.Kube.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumeClaims in %s: %w", namespace, err)
	}
	for i := range pvcs.Items {
		add(kindPVC, "", &pvcs.Items[i])
	}
	for _, gvr := range m.o.ExtraChildResources {
		list, err := m.c.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // not served in this cluster
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", gvr.GroupResource(), namespace, err)
		}
		for i := range list.Items {
			add(list.Items[i].GetKind(), resourceArg(gvr), &list.Items[i])
		}
	}
	return idx, nil
}

// of returns the children of the JobSet uid, sorted.
func (idx childIndex) of(uid types.UID) []Child {
	out := slices.Clone(idx[uid])
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// childAccess reads and writes one child generically.
type childAccess struct {
	get    func(ctx context.Context) (metav1.Object, runtime.Object, error)
	update func(ctx context.Context, obj runtime.Object) error
}

func (m *migrator) access(namespace string, ch Child) childAccess {
	kube := m.c.Kube
	if ch.Resource != "" {
		gvr, _ := schema.ParseResourceArg(ch.Resource)
		if gvr == nil {
			gvr = &schema.GroupVersionResource{}
		}
		api := m.c.Dynamic.Resource(*gvr).Namespace(namespace)
		return childAccess{
			get: func(ctx context.Context) (metav1.Object, runtime.Object, error) {
				o, err := api.Get(ctx, ch.Name, metav1.GetOptions{})
				return o, o, err
			},
			update: func(ctx context.Context, obj runtime.Object) error {
				_, err := api.Update(ctx, obj.(*unstructured.Unstructured), metav1.UpdateOptions{})
				return err
			},
		}
	}
	switch ch.Kind {
	case kindJob:
		api := kube.BatchV1().Jobs(namespace)
		return childAccess{
			get: func(ctx context.Context) (metav1.Object, runtime.Object, error) {
				o, err := api.Get(ctx, ch.Name, metav1.GetOptions{})
				return o, o, err
			},
			update: func(ctx context.Context, obj runtime.Object) error {
				_, err := api.Update(ctx, obj.(*batchv1.Job), metav1.UpdateOptions{})
				return err
			},
		}
	case kindService:
		api := kube.CoreV1().Services(namespace)
		return childAccess{
			get: func(ctx context.Context) (metav1.Object, runtime.Object, error) {
				o, err := api.Get(ctx, ch.Name, metav1.GetOptions{})
				return o, o, err
			},
			update: func(ctx context.Context, obj runtime.Object) error {
				_, err := api.Update(ctx, obj.(*corev1.Service), metav1.UpdateOptions{})
				return err
			},
		}
	default:
		api := kube.CoreV1().PersistentVolumeClaims(namespace)
		return childAccess{
			get: func(ctx context.Context) (metav1.Object, runtime.Object, error) {
				o, err := api.Get(ctx, ch.Name, metav1.GetOptions{})
				return o, o, err
			},
			update: func(ctx context.Context, obj runtime.Object) error {
				_, err := api.Update(ctx, obj.(*corev1.PersistentVolumeClaim), metav1.UpdateOptions{})
				return err
			},
		}
	}
}

// editChild applies edit to the live child with the backup's UID and
// writes it when edit reports a change. A child that is gone or was
// replaced (another UID) is reported through the returned flag.
func (m *migrator) editChild(ctx context.Context, namespace string, ch Child, edit func(obj metav1.Object) bool) (found bool, err error) {
	acc := m.access(namespace, ch)
	found = true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		meta, obj, err := acc.get(ctx)
		if apierrors.IsNotFound(err) || (err == nil && meta.GetUID() != ch.UID) {
			found = false
			return nil
		}
		if err != nil {
			return err
		}
		if !edit(meta) {
			return nil
		}
		return acc.update(ctx, obj)
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return found, err
}

// withoutOwner drops the owner references to uid; it reports a change.
func withoutOwner(obj metav1.Object, uid types.UID) bool {
	refs := obj.GetOwnerReferences()
	kept := refs[:0:0]
	for _, r := range refs {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(refs) {
		return false
	}
	obj.SetOwnerReferences(kept)
	return true
}

// pointAt replaces the owner references to the old JobSet by one to the
// native JobSet, with the old reference's flags, and moves a Job's
// jobset-uid label; it reports a change.
func pointAt(obj metav1.Object, ch Child, oldUID types.UID, js *v1alpha2.JobSet) bool {
	changed := withoutOwner(obj, oldUID)
	refs := obj.GetOwnerReferences()
	has := false
	for _, r := range refs {
		has = has || r.UID == js.UID
	}
	if !has {
		ref := metav1.OwnerReference{
			APIVersion: v1alpha2.SchemeGroupVersion.String(),
			Kind:       "JobSet",
			Name:       js.Name,
			UID:        js.UID,
		}
		if ch.Controller {
			ref.Controller = ptr.To(true)
		}
		if ch.BlockOwnerDeletion {
			ref.BlockOwnerDeletion = ptr.To(true)
		}
		obj.SetOwnerReferences(append(refs, ref))
		changed = true
	}
	if ch.Kind == kindJob {
		labels := obj.GetLabels()
		if _, ok := labels[v1alpha2.JobSetUIDKey]; ok && labels[v1alpha2.JobSetUIDKey] != string(js.UID) {
			labels[v1alpha2.JobSetUIDKey] = string(js.UID)
			obj.SetLabels(labels)
			changed = true
		}
	}
	return changed
}

// resourceArg formats a resource as "<resource>.<version>.<group>", the
// form schema.ParseResourceArg reads.
func resourceArg(gvr schema.GroupVersionResource) string {
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}
