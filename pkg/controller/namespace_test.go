package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// terminatingErr is what the API server answers to a create in a namespace
// being deleted.
func terminatingErr(resource string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x",
		errors.New("unable to create new content in namespace default because it is being terminated"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace default is being terminated", Field: "metadata.namespace",
	}}
	return err
}

// TestNamespaceTerminatingIsNoError: creates refused because the namespace
// is going away are neither errors (no retries) nor warning events.
func TestNamespaceTerminatingIsNoError(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	})
	fx := newFixture(t, js)
	for _, r := range []string{"jobs", "services", "persistentvolumeclaims"} {
		fx.kube.PrependReactor("create", r, func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, terminatingErr(a.GetResource().Resource)
		})
	}
	fx.refresh()
	if _, err := fx.c.sync(fx.ctx, ns+"/js"); err != nil {
		t.Fatalf("sync in a terminating namespace: %v", err)
	}
	for _, e := range fx.events() {
		if len(e) >= 7 && e[:7] == "Warning" {
			t.Errorf("warning event in a terminating namespace: %s", e)
		}
	}
	// Other refusals still fail the sync.
	fx2 := newFixture(t, newJobSet("js"))
	fx2.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "jobs"}, "x", errors.New("quota"))
	})
	fx2.refresh()
	if _, err := fx2.c.sync(fx2.ctx, ns+"/js"); err == nil {
		t.Fatal("a forbidden create without the namespace cause must fail the sync")
	}
}
