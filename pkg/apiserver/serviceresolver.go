package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// serviceSyncTimeout bounds how long the first admission call through a
// webhook waits for its Service to be read from the cluster.
const serviceSyncTimeout = 10 * time.Second

// serviceResolver finds the address of an admission webhook's Service the
// way kube-apiserver does: from the Service object itself (its cluster IP,
// or its external name), because an API server running outside the pod
// network has no cluster DNS to ask.
//
// It watches only the Services that webhooks name, each from its first
// use on, and not every Service in the cluster: a cluster has many more
// (every JobSet has a headless one of its own) than webhooks, and each
// cached Service would stay in this server's memory.
type serviceResolver struct {
	client      kubernetes.Interface
	syncTimeout time.Duration

	// ctx ends the watches when the server stops.
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	watched map[types.NamespacedName]cache.SharedIndexInformer
}

func newServiceResolver(client kubernetes.Interface) *serviceResolver {
	ctx, stop := context.WithCancel(context.Background())
	return &serviceResolver{
		client:      client,
		syncTimeout: serviceSyncTimeout,
		ctx:         ctx,
		stop:        stop,
		watched:     map[types.NamespacedName]cache.SharedIndexInformer{},
	}
}

func (r *serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if r.client == nil {
		return nil, fmt.Errorf("webhook service %s/%s: this server has no cluster to read Services from", namespace, name)
	}
	informer := r.informerFor(namespace, name)
	if !informer.HasSynced() && !r.waitForSync(informer) {
		return nil, fmt.Errorf("webhook service %s/%s: not read from the cluster within %s", namespace, name, r.syncTimeout)
	}
	obj, exists, err := informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("webhook service %s/%s not found", namespace, name)
	}
	return serviceURL(obj.(*corev1.Service), port)
}

// informerFor returns the watch of one Service, started on first use.
func (r *serviceResolver) informerFor(namespace, name string) cache.SharedIndexInformer {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if informer, ok := r.watched[key]; ok {
		return informer
	}
	factory := informers.NewSharedInformerFactoryWithOptions(r.client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	informer := factory.Core().V1().Services().Informer()
	factory.Start(r.ctx.Done())
	r.watched[key] = informer
	return informer
}

func (r *serviceResolver) waitForSync(informer cache.SharedIndexInformer) bool {
	ctx, cancel := context.WithTimeout(r.ctx, r.syncTimeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
}

// Stop ends every watch.
func (r *serviceResolver) Stop() { r.stop() }

func serviceURL(svc *corev1.Service, port int32) (*url.URL, error) {
	var host string
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		host = svc.Spec.ExternalName
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		host = svc.Spec.ClusterIP
	default:
		return nil, fmt.Errorf("webhook service %s/%s has neither a cluster IP nor an external name", svc.Namespace, svc.Name)
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		found := false
		for _, p := range svc.Spec.Ports {
			if p.Port == port {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("webhook service %s/%s has no port %d", svc.Namespace, svc.Name, port)
		}
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}, nil
}
