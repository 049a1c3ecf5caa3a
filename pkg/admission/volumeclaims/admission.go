// Package volumeclaims is the admission plugin JobSetVolumeClaims: a new
// JobSet whose volumeClaimPolicies name a claim that already exists is
// refused when that claim differs from its template, or when the JobSet
// would delete it (whenDeleted other than Retain), as upstream's webhook
// refuses it. The claim is read from the cluster once per template.
package volumeclaims

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/claims"
)

// PluginName is the plugin's name in --enable-admission-plugins and
// --disable-admission-plugins.
const PluginName = "JobSetVolumeClaims"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return New(), nil })
}

// Plugin checks the claims of new JobSets.
type Plugin struct {
	*admission.Handler
	kube kubernetes.Interface
}

var _ admission.ValidationInterface = &Plugin{}

// New returns the plugin; it needs a client, set by the admission
// initializer.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create)}
}

// SetExternalKubeClientSet is how the initializer hands the client over.
func (p *Plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.kube = c }

// ValidateInitialization fails without a client.
func (p *Plugin) ValidateInitialization() error {
	if p.kube == nil {
		return fmt.Errorf("%s needs a Kubernetes client", PluginName)
	}
	return nil
}

// Validate refuses a JobSet create whose claims exist and do not fit.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != jobset.Resource("jobsets") || a.GetSubresource() != "" {
		return nil
	}
	js, ok := a.GetObject().(*jobset.JobSet)
	if !ok || len(js.Spec.VolumeClaimPolicies) == 0 {
		return nil
	}
	var errs field.ErrorList
	policies := field.NewPath("spec", "volumeClaimPolicies")
	for i := range js.Spec.VolumeClaimPolicies {
		policy := &js.Spec.VolumeClaimPolicies[i]
		for j := range policy.Templates {
			t := &policy.Templates[j]
			tp := policies.Index(i).Child("templates").Index(j)
			name := claims.Name(t.Name, js.Name)
			existing, err := p.kube.CoreV1().PersistentVolumeClaims(a.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				errs = append(errs, field.InternalError(tp, fmt.Errorf("checking for an existing claim %s: %w", name, err)))
				continue
			}
			if existing.DeletionTimestamp != nil {
				// Going away (say, with an earlier JobSet of this name):
				// the controller makes a new one once it is gone.
				continue
			}
			if !claims.SpecMatches(existing, t) {
				errs = append(errs, field.Invalid(tp.Child("spec"), "object",
					fmt.Sprintf("spec does not match existing PVC %s in namespace %s (access modes, requests, and the storage class and volume mode where the template sets them must be the same)", name, a.GetNamespace())))
			}
			if !retained(policy) {
				errs = append(errs, field.Invalid(policies.Index(i).Child("retentionPolicy", "whenDeleted"), whenDeleted(policy),
					fmt.Sprintf("retentionPolicy must be retain when PVC exists: claim %s already exists in namespace %s and a JobSet deletes only claims it created", name, a.GetNamespace())))
			}
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(jobset.Kind("JobSet"), js.Name, errs)
	}
	return nil
}

func retained(p *jobset.VolumeClaimPolicy) bool {
	return p.RetentionPolicy != nil && p.RetentionPolicy.WhenDeleted != nil &&
		*p.RetentionPolicy.WhenDeleted == jobset.RetentionPolicyRetain
}

func whenDeleted(p *jobset.VolumeClaimPolicy) string {
	if p.RetentionPolicy == nil || p.RetentionPolicy.WhenDeleted == nil {
		return ""
	}
	return string(*p.RetentionPolicy.WhenDeleted)
}
