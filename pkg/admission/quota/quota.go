// Package quota sets up k8s.io/apiserver's generic ResourceQuota admission
// plugin for jobset-apiserver. Requests to an aggregated API never pass
// kube-apiserver's admission, so without it a quota on
// count/jobsets.jobset.x-k8s.io would limit nothing. kube-controller-manager's
// quota controller computes the usage (it discovers jobsets and counts
// them); the plugin compares a create with the quota's status, refuses it
// with 403 "exceeded quota" when it does not fit, and otherwise charges the
// quota, exactly as kube-apiserver does for its own resources.
package quota

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// PluginName is the plugin's name in --enable-admission-plugins and
// --disable-admission-plugins, the same as in kube-apiserver.
const PluginName = resourcequota.PluginName

// Register adds the generic ResourceQuota plugin to plugins. Its
// configuration (limitedResources) comes from --admission-control-config-file
// as for kube-apiserver.
func Register(plugins *admission.Plugins) {
	resourcequota.Register(plugins)
}

// Configuration says what this server's objects cost: a JobSet counts one
// toward count/jobsets.jobset.x-k8s.io. replicatedjobs is only a view of
// JobSets and cannot be created, so it never counts.
func Configuration() quotav1.Configuration {
	evaluators := []quotav1.Evaluator{
		generic.NewObjectCountEvaluator(jobset.Resource("jobsets"), noUsageStats, ""),
	}
	ignored := map[schema.GroupResource]struct{}{
		jobset.Resource("replicatedjobs"): {},
	}
	return generic.NewConfiguration(evaluators, ignored)
}

// noUsageStats stands in for listing: admission never sums usage (it reads
// it from the quota's status), but an error is better than a nil function.
func noUsageStats(string) ([]runtime.Object, error) {
	return nil, errors.New("JobSet usage is computed by kube-controller-manager's resource quota controller, not by jobset-apiserver")
}

// NewInitializer hands Configuration to the ResourceQuota plugin. It must
// run after the generic initializer, which gives the plugin the stop channel
// it needs first; extra initializers of RecommendedOptions do.
func NewInitializer() admission.PluginInitializer {
	return initializer{}
}

type initializer struct{}

func (initializer) Initialize(p admission.Interface) {
	if wants, ok := p.(genericinitializer.WantsQuotaConfiguration); ok {
		wants.SetQuotaConfiguration(Configuration())
	}
}
