// Package migrate moves JobSets from upstream JobSet's CustomResourceDefinition
// to the native, aggregated JobSet API without stopping their workloads.
//
// The steps, each of which checks the current state first so that a second
// run finishes what a crashed one started:
//
//  1. read every JobSet from the CRD, decode, default and validate it as the
//     native server would; any failure stops the run before any change;
//  2. delete upstream's webhook configurations and scale its controller to
//     zero, then write a backup of each JobSet and the list of its children;
//  3. orphan the children (Jobs, the headless Service, PVCs) so that the
//     garbage collector keeps them when the CRD goes, and delete the CRD;
//  4. register the APIService of the native server and wait until it is
//     Available;
//  5. create each JobSet natively (spec, labels, annotations, owner
//     references), annotated with jobset.sigs.k8s.io/migrating so that the
//     controller leaves it alone, and copy its status;
//  6. point the children at the new JobSet and remove the annotation.
package migrate

import (
	"io"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// Clients reach the cluster. Dynamic serves the CRD-backed JobSets, the CRD
// and the APIService; JobSets the native API once it is registered.
type Clients struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	JobSets versioned.Interface
}

// Step names, in order; Options.StopAfter takes one of them.
const (
	StepValidated   = "validated"
	StepUpstreamOff = "upstream-stopped"
	StepBackedUp    = "backed-up"
	StepOrphaned    = "orphaned"
	StepCRDDeleted  = "crd-deleted"
	StepAPIService  = "apiservice-available"
	StepCreated     = "created"
	StepDone        = "done"
)

// Steps lists the step names in order.
var Steps = []string{StepValidated, StepUpstreamOff, StepBackedUp, StepOrphaned, StepCRDDeleted, StepAPIService, StepCreated, StepDone}

// Options of a migration. Zero values of the names mean upstream's
// defaults (see Defaults).
type Options struct {
	// BackupDir receives one JSON file per JobSet before anything is
	// changed; a later run reads it once the CRD is gone. Required.
	BackupDir string
	// DryRun prints the plan and changes nothing.
	DryRun bool
	// StopAfter ends the run successfully after the named step (one of
	// Steps), to migrate in stages; empty runs every step.
	StopAfter string

	CRDName string
	// WebhookConfigurations are deleted, mutating and validating ones of
	// these names alike; missing ones are ignored.
	WebhookConfigurations []string
	// ExtraChildResources are further resources whose objects a JobSet may
	// own (e.g. Kueue's Workloads), carried over like its Jobs; a resource
	// the cluster does not serve is skipped.
	ExtraChildResources []schema.GroupVersionResource
	// UpstreamController is the <namespace>/<name> of upstream's controller
	// Deployment, scaled to zero; empty skips it.
	UpstreamController string

	// APIService registration: either a manifest file, or built from the
	// Service and CA bundle. With RegisterAPIService false the run only
	// waits for an APIService that something else creates.
	RegisterAPIService bool
	APIServiceFile     string
	ServiceNamespace   string
	ServiceName        string
	ServicePort        int32
	CABundle           []byte

	// Timeout bounds each wait (controller stopped, CRD gone, APIService
	// available).
	Timeout time.Duration
	// Poll is the interval of those waits.
	Poll time.Duration

	// Out receives the plan and progress.
	Out io.Writer
}

// Defaults fills the unset options with upstream's names.
func (o *Options) Defaults() {
	if o.CRDName == "" {
		o.CRDName = "jobsets.jobset.x-k8s.io"
	}
	if o.WebhookConfigurations == nil {
		o.WebhookConfigurations = []string{"jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"}
	}
	if o.ServiceNamespace == "" {
		o.ServiceNamespace = "jobset-system"
	}
	if o.ServiceName == "" {
		o.ServiceName = "jobset-apiserver"
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}
