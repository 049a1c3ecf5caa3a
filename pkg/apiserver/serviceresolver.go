package apiserver

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// serviceResolver finds the address of an admission webhook's Service the
// way kube-apiserver does: from the Service object itself (its cluster IP,
// or its external name), because an API server running outside the pod
// network has no cluster DNS to ask.
type serviceResolver struct {
	services corelisters.ServiceLister
}

func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	svc, err := r.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("webhook service %s/%s not found", namespace, name)
	}
	if err != nil {
		return nil, err
	}
	return serviceURL(svc, port)
}

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

// trimServiceForResolver is the transform of the Service informer behind
// serviceResolver: every Service in the cluster is cached (a JobSet has a
// headless one of its own), and the resolver reads only the type, the
// cluster IP, the external name and the port numbers. A headless Service
// can never be a webhook's backend, so it keeps its name alone.
func trimServiceForResolver(obj interface{}) (interface{}, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil // a tombstone: its key is all that is read
	}
	out := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
	}}
	if svc.Spec.Type != corev1.ServiceTypeExternalName && (svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone) {
		out.Spec.ClusterIP = svc.Spec.ClusterIP
		return out, nil
	}
	out.Spec.Type, out.Spec.ClusterIP, out.Spec.ExternalName = svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.ExternalName
	if len(svc.Spec.Ports) > 0 {
		out.Spec.Ports = make([]corev1.ServicePort, len(svc.Spec.Ports))
		for i, p := range svc.Spec.Ports {
			out.Spec.Ports[i].Port = p.Port
		}
	}
	return out, nil
}
