package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// The controller reads pods (a restart's old pods to delete, the wait for
// them to finish) for their metadata only: names, UIDs, labels, owners and
// deletion timestamps. A list of full pods costs kube-apiserver the pods'
// specs and statuses to encode and the controller to decode them; at 250
// Jobs × 32 pods the wait's lists were the largest part of the
// controller's CPU while a restart waited (test/bench/README.md).

// podSource lists and watches the pods of a namespace as metadata. Label
// and field selectors are applied by the server: a pod that stops matching
// them leaves a watch with a Deleted event.
type podSource interface {
	list(ctx context.Context, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// metadataPods reads through the metadata client (protobuf
// PartialObjectMetadata).
type metadataPods struct{ md metadata.Interface }

func (s metadataPods) list(ctx context.Context, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return s.md.Resource(podsResource).Namespace(namespace).List(ctx, opts)
}

func (s metadataPods) watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return s.md.Resource(podsResource).Namespace(namespace).Watch(ctx, opts)
}

// typedPods reads full pods and keeps their metadata, for a controller
// built without a metadata client. It applies the selectors itself too,
// for clients that ignore them (client-go's fake).
type typedPods struct{ kube kubernetes.Interface }

func (s typedPods) list(ctx context.Context, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	sel, err := parsePodSelectors(opts)
	if err != nil {
		return nil, err
	}
	list, err := s.kube.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: list.ListMeta}
	for i := range list.Items {
		if p := &list.Items[i]; sel.matches(p) {
			out.Items = append(out.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
		}
	}
	return out, nil
}

func (s typedPods) watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	sel, err := parsePodSelectors(opts)
	if err != nil {
		return nil, err
	}
	w, err := s.kube.CoreV1().Pods(namespace).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(in watch.Event) (watch.Event, bool) {
		p, ok := in.Object.(*corev1.Pod)
		if !ok {
			return in, true
		}
		if !sel.labels.Matches(labels.Set(p.Labels)) {
			return in, false
		}
		out := watch.Event{Type: in.Type, Object: &metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta}}
		if in.Type != watch.Deleted && !sel.fields.Matches(podFields(p)) {
			out.Type = watch.Deleted // as a server reports a pod leaving the selection
		}
		return out, true
	}), nil
}

type podSelectors struct {
	labels labels.Selector
	fields fields.Selector
}

func parsePodSelectors(opts metav1.ListOptions) (podSelectors, error) {
	sel := podSelectors{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if sel.labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return sel, fmt.Errorf("label selector %q: %w", opts.LabelSelector, err)
		}
	}
	if opts.FieldSelector != "" {
		if sel.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return sel, fmt.Errorf("field selector %q: %w", opts.FieldSelector, err)
		}
	}
	return sel, nil
}

func (s podSelectors) matches(p *corev1.Pod) bool {
	return s.labels.Matches(labels.Set(p.Labels)) && s.fields.Matches(podFields(p))
}

// podFields are the fields of a pod that the controller selects on.
func podFields(p *corev1.Pod) fields.Set {
	return fields.Set{
		"metadata.name":      p.Name,
		"metadata.namespace": p.Namespace,
		"spec.nodeName":      p.Spec.NodeName,
		"status.phase":       string(p.Status.Phase),
	}
}
