// Package migrate moves JobSets from upstream JobSet's CustomResourceDefinition
// to the native, aggregated JobSet API without stopping their workloads.
//
// The steps, each of which checks the current state first so that a second
// run finishes what a crashed one started:
//
//  1. read every JobSet from the CRD, decode, default and validate it as the
//     native server would; any failure stops the run before any change;
//  2. delete upstream's webhook configurations, scale its controller to
//     zero and wait until its pods are gone and its leader election Lease
//     is free;
//  3. block every other client's JobSet writes with a ValidatingAdmissionPolicy,
//     write a backup of each JobSet and the list of its children, orphan the
//     children (Jobs, the headless Service, PVCs) so that the garbage
//     collector keeps them when the CRD goes, check that no JobSet changed
//     since the backup, delete the CRD and lift the block;
//  4. register the APIService of the native server and wait until it is
//     Available;
//  5. create each JobSet natively (spec, labels, annotations, owner
//     references), annotated with jobset.sigs.k8s.io/migrating so that the
//     controller leaves it alone, and copy its status;
//  6. point the children at the new JobSet, mark the backup as done (a later
//     run skips it) and remove the annotation.
package migrate

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
	// Deployment, scaled to zero. Not finding it is an error unless
	// NoUpstreamController is set; empty needs NoUpstreamController.
	UpstreamController string
	// NoUpstreamController is the operator's word that no upstream
	// controller runs, so that a missing Deployment is not an error.
	NoUpstreamController bool
	// UpstreamLease is the <namespace>/<name> of upstream's leader election
	// Lease; the run goes on only once it is released or expired (or does
	// not exist).
	UpstreamLease string

	// APIService registration: either a manifest file, or built from the
	// Service and CA bundle. With RegisterAPIService false the run only
	// waits for an APIService that something else creates.
	RegisterAPIService bool
	APIServiceFile     string
	ServiceNamespace   string
	ServiceName        string
	ServicePort        int32
	CABundle           []byte

	// Timeout bounds each wait (controller stopped, Lease free, admission
	// policy enforced, CRD gone, APIService available).
	Timeout time.Duration
	// Poll is the interval of those waits.
	Poll time.Duration

	// Out receives the plan and progress.
	Out io.Writer
}

// DefaultUpstreamLease is the Lease of upstream v0.12's manager: its
// leader election ID in the namespace it runs in (jobset-system with
// upstream's manifests; a Helm release's namespace otherwise).
const DefaultUpstreamLease = "jobset-system/6d4f6a47.x-k8s.io"

// Defaults fills the unset options with upstream's names.
func (o *Options) Defaults() {
	if o.CRDName == "" {
		o.CRDName = "jobsets.jobset.x-k8s.io"
	}
	if o.WebhookConfigurations == nil {
		o.WebhookConfigurations = []string{"jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"}
	}
	if o.UpstreamLease == "" {
		o.UpstreamLease = DefaultUpstreamLease
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

// validate checks the options before anything is read or changed.
func (o *Options) validate() error {
	if o.BackupDir == "" {
		return errors.New("a backup directory is required")
	}
	if o.StopAfter != "" && !slices.Contains(Steps, o.StopAfter) {
		return fmt.Errorf("unknown step %q; one of %s", o.StopAfter, strings.Join(Steps, ", "))
	}
	if o.UpstreamController == "" && !o.NoUpstreamController {
		return errors.New("no Deployment of upstream's controller named: name it (--upstream-controller), or say that none runs (--no-upstream-controller)")
	}
	if o.UpstreamController != "" {
		if _, _, err := splitName("upstream controller", o.UpstreamController); err != nil {
			return err
		}
	}
	_, _, err := splitName("upstream lease", o.UpstreamLease)
	return err
}

// splitName splits "<namespace>/<name>".
func splitName(what, s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%s %q: want <namespace>/<name>", what, s)
	}
	return namespace, name, nil
}
