package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A webhook's Service resolves to its cluster IP or external name, and only
// when it has a cluster IP or an external name and (but for an external
// name) the port asked for.
func TestServiceURL(t *testing.T) {
	ports := []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(9443)}, {Name: "metrics", Port: 8080}}
	cases := []struct {
		name string
		spec corev1.ServiceSpec
		port int32
		want string // a URL, or the start of an error
	}{
		{"cluster IP", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.7", Ports: ports}, 443, "https://10.0.0.7:443"},
		{"cluster IP, second port", corev1.ServiceSpec{ClusterIP: "10.0.0.7", Ports: ports}, 8080, "https://10.0.0.7:8080"},
		{"cluster IP, target port only", corev1.ServiceSpec{ClusterIP: "10.0.0.7", Ports: ports}, 9443, "error: webhook service ns/hook has no port 9443"},
		{"IPv6 cluster IP", corev1.ServiceSpec{ClusterIP: "fd00::7", Ports: ports}, 443, "https://[fd00::7]:443"},
		{"external name", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}, 9443, "https://localhost:9443"},
		{"node port", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.8", Ports: []corev1.ServicePort{{Port: 443, NodePort: 30443}}}, 443, "https://10.0.0.8:443"},
		{"headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: ports}, 443, "error: webhook service ns/hook has neither a cluster IP nor an external name"},
		{"no cluster IP", corev1.ServiceSpec{Ports: ports}, 443, "error: webhook service ns/hook has neither"},
	}
	for _, tc := range cases {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "ns"}, Spec: tc.spec}
		u, err := serviceURL(svc, tc.port)
		got := fmt.Sprint(u)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func service(ns, name, clusterIP string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{{Port: 443}}}}
}

// The resolver reads only the Services webhooks name, by name, follows
// their changes, and tells a missing Service from a present one.
func TestServiceResolverWatchesOnlyNamedServices(t *testing.T) {
	client := fake.NewClientset(service("hooks", "hook", "10.0.0.7"), service("hooks", "other", "10.0.0.9"),
		service("jobs", "my-jobset", corev1.ClusterIPNone))
	r := newServiceResolver(client)
	t.Cleanup(r.Stop)

	u, err := r.ResolveEndpoint("hooks", "hook", 443)
	if err != nil || u.String() != "https://10.0.0.7:443" {
		t.Fatalf("resolve hooks/hook: %v, %v", u, err)
	}
	if _, err := r.ResolveEndpoint("hooks", "absent", 443); err == nil || !strings.Contains(err.Error(), "hooks/absent not found") {
		t.Errorf("resolve a missing Service: %v, want not found", err)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "services" || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
			t.Errorf("unexpected request %s %s", a.GetVerb(), a.GetResource())
			continue
		}
		var fields string
		switch a := a.(type) {
		case clienttesting.ListAction:
			fields = a.GetListRestrictions().Fields.String()
		case clienttesting.WatchAction:
			fields = a.GetWatchRestrictions().Fields.String()
		}
		if a.GetNamespace() != "hooks" || (fields != "metadata.name=hook" && fields != "metadata.name=absent") {
			t.Errorf("%s of Services in %q with fields %q: want only the named ones in hooks", a.GetVerb(), a.GetNamespace(), fields)
		}
	}

	ctx := context.Background()
	moved := service("hooks", "hook", "10.0.0.8")
	if _, err := client.CoreV1().Services("hooks").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("hooks").Create(ctx, service("hooks", "absent", "10.0.0.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"hook": "https://10.0.0.8:443", "absent": "https://10.0.0.10:443"} {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			u, err := r.ResolveEndpoint("hooks", name, 443)
			last = fmt.Sprint(u, err)
			return err == nil && u.String() == want, nil
		})
		if err != nil {
			t.Errorf("hooks/%s after its change: %s, want %s", name, last, want)
		}
	}
	if n := len(r.watched); n != 2 {
		t.Errorf("%d Services watched, want the 2 named", n)
	}
}

// Without a cluster, or when the Service cannot be read in time, the
// webhook call fails with a reason rather than waiting on.
func TestServiceResolverErrors(t *testing.T) {
	if _, err := newServiceResolver(nil).ResolveEndpoint("hooks", "hook", 443); err == nil || !strings.Contains(err.Error(), "no cluster") {
		t.Errorf("without a client: %v", err)
	}
	client := fake.NewClientset()
	client.PrependReactor("list", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("the cluster is away")
	})
	r := newServiceResolver(client)
	r.syncTimeout = 200 * time.Millisecond
	t.Cleanup(r.Stop)
	if _, err := r.ResolveEndpoint("hooks", "hook", 443); err == nil || !strings.Contains(err.Error(), "not read from the cluster within 200ms") {
		t.Errorf("with a cluster that does not answer: %v", err)
	}
}
