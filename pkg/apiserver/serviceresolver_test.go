package apiserver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The resolver gives the same answer for a cached (trimmed) Service as for
// the whole object, for every kind of Service and for ports it has and
// lacks.
func TestTrimmedServiceResolvesAsWhole(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "hook", Namespace: "ns", UID: "u1", ResourceVersion: "7",
		Labels: map[string]string{"app": "hook"}, Annotations: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	ports := []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(9443), Protocol: corev1.ProtocolTCP}, {Name: "metrics", Port: 8080}}
	services := map[string]corev1.ServiceSpec{
		"cluster IP":              {Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"}, Ports: ports, Selector: map[string]string{"app": "hook"}},
		"external name":           {Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: ports},
		"external name, no ports": {Type: corev1.ServiceTypeExternalName, ExternalName: "hooks.example.com"},
		"headless":                {Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, Ports: ports, Selector: map[string]string{"app": "hook"}},
		"no cluster IP":           {Type: corev1.ServiceTypeClusterIP, Ports: ports},
		"node port":               {Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.8", Ports: []corev1.ServicePort{{Port: 443, NodePort: 30443}}},
	}
	for name, spec := range services {
		whole := &corev1.Service{ObjectMeta: *meta.DeepCopy(), Spec: spec}
		obj, err := trimServiceForResolver(whole.DeepCopy())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		trimmed := obj.(*corev1.Service)
		if trimmed.Name != meta.Name || trimmed.Namespace != meta.Namespace || trimmed.ResourceVersion != meta.ResourceVersion {
			t.Errorf("%s: trimmed metadata %+v lost the key or the resource version", name, trimmed.ObjectMeta)
		}
		if trimmed.Labels != nil || trimmed.Annotations != nil || trimmed.ManagedFields != nil || trimmed.Spec.Selector != nil {
			t.Errorf("%s: trimmed Service keeps what the resolver never reads: %+v", name, trimmed)
		}
		for _, port := range []int32{443, 8080, 9443} {
			wantURL, wantErr := serviceURL(whole, port)
			gotURL, gotErr := serviceURL(trimmed, port)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Errorf("%s, port %d: error %v, want %v", name, port, gotErr, wantErr)
			}
			if fmt.Sprint(wantURL) != fmt.Sprint(gotURL) {
				t.Errorf("%s, port %d: %v, want %v", name, port, gotURL, wantURL)
			}
		}
	}
	tombstone := "ns/gone"
	if got, err := trimServiceForResolver(tombstone); err != nil || got != tombstone {
		t.Errorf("a non-Service passes through unchanged: got %v, %v", got, err)
	}
}
