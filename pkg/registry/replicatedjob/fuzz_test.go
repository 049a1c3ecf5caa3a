package replicatedjob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/install"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/apis/jobset/validation"
	jobsetregistry "github.com/nativejobset/jobset/pkg/registry/jobset"
)

// FuzzScale drives a /scale write end to end short of storage: a valid
// JobSet (decoded, prepared and validated as a create) is scaled through
// the Scale's UpdatedObject and then the JobSet strategy's update path, as
// the store does. No panic; refusals are 4xx API errors; a write that is
// accepted sets exactly the scaled template's parallelism (and completions
// when they were equal), changes nothing else, and leaves a valid JobSet.
func FuzzScale(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "apis", "jobset", "validation", "testdata", "seed", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, replicas := range []int32{-1, 0, 1, 3, 1 << 30} {
			f.Add(data, uint8(0), replicas, false)
			f.Add(data, uint8(1), replicas, true)
		}
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	strategy := jobsetregistry.NewStrategy(scheme)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")

	f.Fuzz(func(t *testing.T, data []byte, rjIndex uint8, replicas int32, queued bool) {
		old, err := decodeJobSet(scheme, dec, data)
		if err != nil || len(old.Spec.ReplicatedJobs) == 0 {
			return
		}
		if queued {
			if old.Labels == nil {
				old.Labels = map[string]string{}
			}
			old.Labels[jobset.QueueNameLabel] = "q"
		}
		strategy.PrepareForCreate(ctx, old)
		if errs := strategy.Validate(ctx, old); len(errs) > 0 {
			return
		}
		old.ResourceVersion = "7"
		idx := int(rjIndex) % len(old.Spec.ReplicatedJobs)
		rjName := old.Spec.ReplicatedJobs[idx].Name
		name := old.Name + "." + rjName
		info := &scaleUpdatedObjectInfo{name: name, rjName: rjName, reqObjInfo: rest.DefaultUpdatedObjectInfo(&Scale{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: old.Namespace},
			Spec:       scaleSpec(replicas),
		})}
		obj, err := info.UpdatedObject(ctx, old)
		if err != nil {
			if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code < 400 || st.Status().Code >= 500 {
				t.Fatalf("refusal is not a 4xx API error: %v", err)
			}
			return
		}
		nu := obj.(*jobset.JobSet)
		strategy.PrepareForUpdate(ctx, nu, old)
		if errs := strategy.ValidateUpdate(ctx, nu, old); len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" {
					t.Errorf("an error without a field path: %v", e)
				}
			}
			return
		}
		if replicas < 1 {
			t.Fatalf("a scale to %d was accepted", replicas)
		}
		got := nu.Spec.ReplicatedJobs[idx].Template.Spec
		if p := parallelismOf(&got); p != replicas {
			t.Errorf("parallelism after a scale to %d: %d", replicas, p)
		}
		oldSpec := old.Spec.ReplicatedJobs[idx].Template.Spec
		before := parallelismOf(&oldSpec)
		if before != replicas && oldSpec.Completions != nil && *oldSpec.Completions == before && (got.Completions == nil || *got.Completions != replicas) {
			t.Errorf("completions equal to parallelism (%d) did not follow the scale to %d: %v", before, replicas, got.Completions)
		}
		// Apart from those two fields nothing changed.
		masked := nu.DeepCopy()
		masked.Spec.ReplicatedJobs[idx].Template.Spec.Parallelism = oldSpec.Parallelism
		masked.Spec.ReplicatedJobs[idx].Template.Spec.Completions = oldSpec.Completions
		masked.ManagedFields, masked.Generation = old.ManagedFields, old.Generation
		if !apiequality.Semantic.DeepEqual(masked.Spec, old.Spec) || !apiequality.Semantic.DeepEqual(masked.ObjectMeta, old.ObjectMeta) {
			t.Errorf("a scale changed more than parallelism and completions")
		}
		if errs := validation.ValidateJobSet(nu); len(errs) > 0 {
			t.Errorf("an accepted scale to %d leaves an invalid JobSet: %v", replicas, errs)
		}
	})
}

func decodeJobSet(scheme *runtime.Scheme, dec runtime.Decoder, data []byte) (*jobset.JobSet, error) {
	gvk := v1alpha2.SchemeGroupVersion.WithKind("JobSet")
	obj, _, err := dec.Decode(data, &gvk, &v1alpha2.JobSet{})
	if err != nil {
		return nil, err
	}
	external, ok := obj.(*v1alpha2.JobSet)
	if !ok {
		return nil, fmt.Errorf("decoded a %T", obj)
	}
	scheme.Default(external)
	js := &jobset.JobSet{}
	if err := scheme.Convert(external, js, nil); err != nil {
		return nil, err
	}
	js.Namespace = "default"
	if js.Name == "" {
		js.Name = "fuzz"
	}
	return js, nil
}

func scaleSpec(replicas int32) autoscalingv1.ScaleSpec {
	return autoscalingv1.ScaleSpec{Replicas: replicas}
}
