package validation

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

const (
	errInvalid      = field.ErrorTypeInvalid
	errRequired     = field.ErrorTypeRequired
	errForbidden    = field.ErrorTypeForbidden
	errNotSupported = field.ErrorTypeNotSupported
	errTooLong      = field.ErrorTypeTooLong
	errDuplicate    = field.ErrorTypeDuplicate
	errTooMany      = field.ErrorTypeTooMany
)

func TestValidateJobSet(t *testing.T) {
	const (
		rj0 = "spec.replicatedJobs[0]"
		rj1 = "spec.replicatedJobs[1]"
		fp  = "spec.failurePolicy"
		vcp = "spec.volumeClaimPolicies"
	)
	cases := []struct {
		name   string
		mutate func(js *jobset.JobSet)
		want   []wantErr
	}{
		{name: "valid", mutate: func(*jobset.JobSet) {}},

		// metadata and generated names
		{
			name:   "name and generateName missing",
			mutate: func(js *jobset.JobSet) { js.Name = "" },
			want:   []wantErr{{errRequired, "metadata.name", ""}},
		},
		{
			// The API server generates the name before it validates; on its
			// own, ValidateObjectMeta insists on a name.
			name:   "generateName without a generated name",
			mutate: func(js *jobset.JobSet) { js.Name, js.GenerateName = "", "js-" },
			want:   []wantErr{{errRequired, "metadata.name", ""}},
		},
		{
			name:   "name is not a DNS-1035 label",
			mutate: func(js *jobset.JobSet) { js.Name = "js.example" },
			want:   []wantErr{{errInvalid, "metadata.name", "DNS-1035"}},
		},
		{
			name:   "namespace missing",
			mutate: func(js *jobset.JobSet) { js.Namespace = "" },
			want:   []wantErr{{errRequired, "metadata.namespace", ""}},
		},
		{
			// "<55>-leader-0" has 64 characters, "<55>-workers-1" 65.
			name:   "job name too long",
			mutate: func(js *jobset.JobSet) { js.Name = strings.Repeat("a", 55) },
			want: []wantErr{
				{errInvalid, "metadata.name", jobNameTooLongMsg + ` (replicatedJob "leader"`},
				{errInvalid, "metadata.name", jobNameTooLongMsg + ` (replicatedJob "workers"`},
			},
		},
		{
			// "<45 chars>-workers-1-3-abcde" has exactly 63 characters.
			name:   "longest pod name at the limit",
			mutate: func(js *jobset.JobSet) { js.Name = strings.Repeat("a", 45) },
		},
		{
			name:   "pod name too long",
			mutate: func(js *jobset.JobSet) { js.Name = strings.Repeat("a", 46) },
			want:   []wantErr{{errInvalid, "metadata.name", podNameTooLongMsg}},
		},
		{
			name: "pod name not checked for NonIndexed jobs",
			mutate: func(js *jobset.JobSet) {
				js.Name = strings.Repeat("a", 46)
				js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			},
		},
		{
			name: "pod name not checked without completions",
			mutate: func(js *jobset.JobSet) {
				js.Name = strings.Repeat("a", 46)
				js.Spec.ReplicatedJobs[1].Template.Spec.Completions = nil
			},
		},
		{
			// 40 + 5 random characters: the pod name has 63 characters.
			name:   "generateName at the limit",
			mutate: func(js *jobset.JobSet) { js.Name, js.GenerateName = "", strings.Repeat("a", 40) },
			want:   []wantErr{{errRequired, "metadata.name", ""}},
		},
		{
			name:   "generateName makes pod names too long",
			mutate: func(js *jobset.JobSet) { js.Name, js.GenerateName = "", strings.Repeat("a", 41) },
			want: []wantErr{
				{errRequired, "metadata.name", ""},
				{errInvalid, "metadata.generateName", podNameTooLongMsg},
			},
		},
		{
			// With NonIndexed templates only Job names count:
			// "<53>-workers-1" has 63 characters, "<53>-workers-10" 64.
			name: "replicas make job names longer",
			mutate: func(js *jobset.JobSet) {
				js.Name = strings.Repeat("a", 53)
				for i := range js.Spec.ReplicatedJobs {
					js.Spec.ReplicatedJobs[i].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				}
				js.Spec.ReplicatedJobs[1].Replicas = 11
			},
			want: []wantErr{{errInvalid, "metadata.name", jobNameTooLongMsg}},
		},

		// replicatedJobs
		{
			name:   "no replicatedJobs",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs = nil },
			want:   []wantErr{{errRequired, "spec.replicatedJobs", "at least one"}},
		},
		{
			name:   "replicatedJob name missing",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "" },
			want:   []wantErr{{errRequired, rj0 + ".name", ""}},
		},
		{
			name:   "replicatedJob name starting with a digit, as upstream accepts",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "1st" },
		},
		{
			name:   "replicatedJob name of digits and dashes",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "0-workers" },
		},
		{
			name:   "replicatedJob name not a DNS-1123 label",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "Leader_1" },
			want:   []wantErr{{errInvalid, rj0 + ".name", "RFC 1123"}},
		},
		{
			name:   "replicatedJob name ending with a dash",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "leader-" },
			want:   []wantErr{{errInvalid, rj0 + ".name", "RFC 1123"}},
		},
		{
			name:   "duplicate replicatedJob names",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Name = "leader" },
			want:   []wantErr{{errDuplicate, rj1 + ".name", ""}},
		},
		{
			name:   "groupName not a DNS-1035 label",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].GroupName = "Group_1" },
			want:   []wantErr{{errInvalid, rj1 + ".groupName", "DNS-1035"}},
		},
		{
			name:   "groupName too long",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].GroupName = strings.Repeat("g", 64) },
			want:   []wantErr{{errInvalid, rj1 + ".groupName", "groupName is too long, must be less than 63 characters"}},
		},
		{
			name:   "groupName missing",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].GroupName = "" },
			want:   []wantErr{{errRequired, rj1 + ".groupName", ""}},
		},
		{
			name:   "zero replicas",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = 0 },
		},
		{
			name:   "negative replicas",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[1].Replicas = -1 },
			want:   []wantErr{{errInvalid, rj1 + ".replicas", "greater than or equal to 0"}},
		},
		{
			name: "replicas times parallelism exceeds MaxInt32",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Replicas = 1 << 20
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = ptr.To[int32](1 << 12)
			},
			// The message names the product (2^32), not the parallelism.
			want: []wantErr{{errInvalid, rj1 + ".replicas", "the product of replicas and parallelism (4294967296) must not exceed 2147483647"}},
		},
		{
			name: "replicas times default parallelism at MaxInt32",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Replicas = 1<<31 - 1
				js.Spec.ReplicatedJobs[1].Template.Spec.Parallelism = nil
				js.Spec.ReplicatedJobs[1].Template.Spec.Completions = nil
			},
		},

		// dependsOn
		{
			name: "valid dependsOn",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader", Status: jobset.DependencyReady}}
			},
		},
		{
			name: "dependsOn on the first replicatedJob",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].DependsOn = []jobset.DependsOn{{Name: "workers", Status: jobset.DependencyReady}}
			},
			want: []wantErr{{errForbidden, rj0 + ".dependsOn", "DependsOn can't be set for the first ReplicatedJob"}},
		},
		{
			name: "dependsOn itself",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "workers", Status: jobset.DependencyComplete}}
			},
			want: []wantErr{{errInvalid, rj1 + ".dependsOn[0].name", "cannot depend on itself"}},
		},
		{
			name: "dependsOn a later replicatedJob",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, testRJ("evaluator", 1, 1))
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "evaluator", Status: jobset.DependencyComplete}}
			},
			want: []wantErr{{errInvalid, rj1 + ".dependsOn[0].name", "comes later"}},
		},
		{
			name: "dependsOn an unknown replicatedJob",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "nope", Status: jobset.DependencyReady}}
			},
			want: []wantErr{{errInvalid, rj1 + ".dependsOn[0].name", "no replicatedJob with this name"}},
		},
		{
			name: "dependsOn without name",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Status: jobset.DependencyReady}}
			},
			want: []wantErr{{errRequired, rj1 + ".dependsOn[0].name", ""}},
		},
		{
			name: "dependsOn unsupported status",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader", Status: "Running"}}
			},
			want: []wantErr{{errNotSupported, rj1 + ".dependsOn[0].status", ""}},
		},
		{
			name: "dependsOn without status",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader"}}
			},
			want: []wantErr{{errRequired, rj1 + ".dependsOn[0].status", ""}},
		},
		{
			name: "dependsOn duplicate names",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{
					{Name: "leader", Status: jobset.DependencyReady},
					{Name: "leader", Status: jobset.DependencyComplete},
				}
			},
			want: []wantErr{{errDuplicate, rj1 + ".dependsOn[1].name", ""}},
		},
		{
			name:   "dependsOn five entries",
			mutate: func(js *jobset.JobSet) { dependOnPredecessors(js, 5) },
		},
		{
			name:   "dependsOn six entries",
			mutate: func(js *jobset.JobSet) { dependOnPredecessors(js, 6) },
			want:   []wantErr{{errTooMany, "spec.replicatedJobs[6].dependsOn", ""}},
		},
		{
			name: "dependsOn with startupPolicy InOrder",
			mutate: func(js *jobset.JobSet) {
				js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder
				js.Spec.ReplicatedJobs[1].DependsOn = []jobset.DependsOn{{Name: "leader", Status: jobset.DependencyReady}}
			},
			want: []wantErr{{errForbidden, rj1 + ".dependsOn", mutuallyExclusive}},
		},

		// network and managedBy
		{
			name:   "valid subdomain",
			mutate: func(js *jobset.JobSet) { js.Spec.Network.Subdomain = "my-service" },
		},
		{
			name:   "subdomain with a dot",
			mutate: func(js *jobset.JobSet) { js.Spec.Network.Subdomain = "my.service" },
			want:   []wantErr{{errInvalid, "spec.network.subdomain", "DNS-1035"}},
		},
		{
			name:   "subdomain not a DNS-1123 subdomain",
			mutate: func(js *jobset.JobSet) { js.Spec.Network.Subdomain = "My_Service" },
			want:   []wantErr{{errInvalid, "spec.network.subdomain", "RFC 1123 subdomain"}},
		},
		{
			name:   "subdomain too long",
			mutate: func(js *jobset.JobSet) { js.Spec.Network.Subdomain = strings.Repeat("s", 64) },
			want:   []wantErr{{errInvalid, "spec.network.subdomain", "subdomain is too long, must be less than 63 characters"}},
		},
		{
			name:   "valid managedBy",
			mutate: func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") },
		},
		{
			name:   "managedBy not a domain-prefixed path",
			mutate: func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("multikueue") },
			want:   []wantErr{{errInvalid, "spec.managedBy", "domain-prefixed path"}},
		},
		{
			name:   "managedBy too long",
			mutate: func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/" + strings.Repeat("p", 52)) },
			want:   []wantErr{{errTooLong, "spec.managedBy", "63"}},
		},

		// startupPolicy and successPolicy
		{
			name:   "startupPolicy InOrder",
			mutate: func(js *jobset.JobSet) { js.Spec.StartupPolicy.StartupPolicyOrder = jobset.InOrder },
		},
		{
			name:   "unsupported startupPolicyOrder",
			mutate: func(js *jobset.JobSet) { js.Spec.StartupPolicy.StartupPolicyOrder = "Random" },
			want:   []wantErr{{errNotSupported, "spec.startupPolicy.startupPolicyOrder", ""}},
		},
		{
			name: "successPolicy Any with targets",
			mutate: func(js *jobset.JobSet) {
				js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAny, TargetReplicatedJobs: []string{"leader"}}
			},
		},
		{
			name:   "unsupported successPolicy operator",
			mutate: func(js *jobset.JobSet) { js.Spec.SuccessPolicy.Operator = "Most" },
			want:   []wantErr{{errNotSupported, "spec.successPolicy.operator", ""}},
		},
		{
			name: "successPolicy targets an unknown replicatedJob",
			mutate: func(js *jobset.JobSet) {
				js.Spec.SuccessPolicy.TargetReplicatedJobs = []string{"leader", "driver"}
			},
			want: []wantErr{{errNotSupported, "spec.successPolicy.targetReplicatedJobs[1]", `"workers"`}},
		},

		// failurePolicy
		{
			name: "valid failurePolicy",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name:                        "retryOnOOM",
					Action:                      jobset.RestartJobSetAndIgnoreMaxRestarts,
					OnJobFailureReasons:         []string{batchv1.JobReasonPodFailurePolicy, batchv1.JobReasonBackoffLimitExceeded},
					OnJobFailureMessagePatterns: []string{`OOMKilled`, `exit code \d+`},
					TargetReplicatedJobs:        []string{"workers"},
				}, jobset.FailurePolicyRule{Name: "failurePolicyRule1", Action: jobset.FailJobSet})
			},
		},
		{
			name: "negative maxRestarts",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js)
				js.Spec.FailurePolicy.MaxRestarts = -1
			},
			want: []wantErr{{errInvalid, fp + ".maxRestarts", ""}},
		},
		{
			name: "BlockingRecreate",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js)
				js.Spec.FailurePolicy.RestartStrategy = jobset.BlockingRecreate
			},
		},
		{
			name: "unsupported restartStrategy",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js)
				js.Spec.FailurePolicy.RestartStrategy = "Rolling"
			},
			want: []wantErr{{errNotSupported, fp + ".restartStrategy", ""}},
		},
		{
			name:   "rule name missing",
			mutate: func(js *jobset.JobSet) { withFailurePolicy(js, jobset.FailurePolicyRule{Action: jobset.FailJobSet}) },
			want:   []wantErr{{errRequired, fp + ".rules[0].name", ""}},
		},
		{
			name: "rule name of 128 characters",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: strings.Repeat("r", 128), Action: jobset.FailJobSet})
			},
		},
		{
			name: "rule name too long",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: strings.Repeat("r", 129), Action: jobset.FailJobSet})
			},
			want: []wantErr{{errTooLong, fp + ".rules[0].name", "128"}},
		},
		{
			name: "rule name with a bad character",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "retry-all", Action: jobset.FailJobSet})
			},
			want: []wantErr{{errInvalid, fp + ".rules[0].name", "must start with a letter"}},
		},
		{
			name: "rule name starting with a digit",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "1rule", Action: jobset.FailJobSet})
			},
			want: []wantErr{{errInvalid, fp + ".rules[0].name", ""}},
		},
		{
			name: "duplicate rule names",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js,
					jobset.FailurePolicyRule{Name: "a", Action: jobset.FailJobSet},
					jobset.FailurePolicyRule{Name: "a", Action: jobset.RestartJobSet})
			},
			want: []wantErr{{errDuplicate, fp + ".rules[1].name", ""}},
		},
		{
			name:   "rule without action",
			mutate: func(js *jobset.JobSet) { withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a"}) },
			want:   []wantErr{{errRequired, fp + ".rules[0].action", ""}},
		},
		{
			name: "unsupported action",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a", Action: "Ignore"})
			},
			want: []wantErr{{errNotSupported, fp + ".rules[0].action", "RestartJobAndIgnoreMaxRestarts"}},
		},
		{
			name: "unsupported failure reason",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name: "a", Action: jobset.FailJobSet,
					OnJobFailureReasons: []string{batchv1.JobReasonDeadlineExceeded, "OOMKilled"},
				})
			},
			want: []wantErr{{errNotSupported, fp + ".rules[0].onJobFailureReasons[1]", "MaxFailedIndexesExceeded"}},
		},
		{
			name: "duplicate failure reasons",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name: "a", Action: jobset.FailJobSet,
					OnJobFailureReasons: []string{batchv1.JobReasonFailedIndexes, batchv1.JobReasonFailedIndexes},
				})
			},
			want: []wantErr{{errDuplicate, fp + ".rules[0].onJobFailureReasons[1]", ""}},
		},
		{
			name: "message pattern that does not compile",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name: "a", Action: jobset.FailJobSet,
					OnJobFailureMessagePatterns: []string{"ok", "also ok", "(unclosed"},
				})
			},
			want: []wantErr{{errInvalid, fp + ".rules[0].onJobFailureMessagePatterns[2]", "missing closing )"}},
		},
		{
			name: "duplicate message patterns",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name: "a", Action: jobset.FailJobSet,
					OnJobFailureMessagePatterns: []string{"x.*", "x.*"},
				})
			},
			want: []wantErr{{errDuplicate, fp + ".rules[0].onJobFailureMessagePatterns[1]", ""}},
		},
		{
			name: "rule targets an unknown replicatedJob",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{
					Name: "a", Action: jobset.FailJobSet, TargetReplicatedJobs: []string{"driver"},
				})
			},
			want: []wantErr{{errNotSupported, fp + ".rules[0].targetReplicatedJobs[0]", ""}},
		},
		{
			name: "RestartJob with 1024 replicas",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a", Action: jobset.RestartJob})
				js.Spec.ReplicatedJobs[1].Replicas = 1024
			},
		},
		{
			name: "RestartJob with 1025 replicas",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a", Action: jobset.RestartJob})
				js.Spec.ReplicatedJobs[1].Replicas = 1025
			},
			want: []wantErr{{errInvalid, rj1 + ".replicas", "replicas > 1024"}},
		},
		{
			name: "RestartJobAndIgnoreMaxRestarts with 1025 replicas",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js,
					jobset.FailurePolicyRule{Name: "a", Action: jobset.FailJobSet},
					jobset.FailurePolicyRule{Name: "b", Action: jobset.RestartJobAndIgnoreMaxRestarts})
				js.Spec.ReplicatedJobs[0].Replicas = 1025
			},
			want: []wantErr{{errInvalid, rj0 + ".replicas", "spec.failurePolicy.rules[1].action"}},
		},
		{
			name: "RestartJobSet with 1025 replicas",
			mutate: func(js *jobset.JobSet) {
				withFailurePolicy(js, jobset.FailurePolicyRule{Name: "a", Action: jobset.RestartJobSet})
				js.Spec.ReplicatedJobs[1].Replicas = 1025
			},
		},

		// coordinator
		{
			name: "valid coordinator",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 3}
			},
		},
		{
			name:   "coordinator without replicatedJob",
			mutate: func(js *jobset.JobSet) { js.Spec.Coordinator = &jobset.Coordinator{} },
			want:   []wantErr{{errRequired, "spec.coordinator.replicatedJob", ""}},
		},
		{
			name:   "coordinator names an unknown replicatedJob",
			mutate: func(js *jobset.JobSet) { js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "driver"} },
			want:   []wantErr{{errNotSupported, "spec.coordinator.replicatedJob", ""}},
		},
		{
			name: "coordinator jobIndex out of range",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 2}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.jobIndex", "less than the 2 replicas"}},
		},
		{
			name: "coordinator negative jobIndex",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: -1}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.jobIndex", ""}},
		},
		{
			name: "coordinator podIndex out of range",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", PodIndex: 4}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.podIndex", "less than the 4 completions"}},
		},
		{
			name: "coordinator negative podIndex",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", PodIndex: -1}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.podIndex", ""}},
		},
		{
			name: "coordinator in a NonIndexed replicatedJob",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers"}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.replicatedJob", "Indexed"}},
		},
		{
			name: "coordinator in a replicatedJob without completions",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Completions = nil
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers"}
			},
			want: []wantErr{{errInvalid, "spec.coordinator.replicatedJob", "completions"}},
		},
		{
			// "js-workers-1-3." has 15 characters.
			name: "coordinator endpoint of 63 characters",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Network.Subdomain = strings.Repeat("s", 48)
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 3}
			},
		},
		{
			name: "coordinator endpoint too long",
			mutate: func(js *jobset.JobSet) {
				js.Spec.Network.Subdomain = strings.Repeat("s", 49)
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 3}
			},
			want: []wantErr{{errInvalid, "spec.coordinator", "no more than 63"}},
		},
		{
			// Without a subdomain the JobSet name is the subdomain:
			// "<25>-workers-1-3.<25>" has 63 characters, one more is too many.
			name: "coordinator endpoint too long with the default subdomain",
			mutate: func(js *jobset.JobSet) {
				js.Name = strings.Repeat("a", 25)
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 30}
				js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](31)
			},
			want: []wantErr{{errInvalid, "spec.coordinator", "no more than 63"}},
		},

		// volumeClaimPolicies
		{
			name:   "valid volumeClaimPolicies",
			mutate: func(js *jobset.JobSet) { withClaims(js, "data", "cache"); withClaims(js, "scratch") },
		},
		{
			name: "claim mounted by an initContainer only",
			mutate: func(js *jobset.JobSet) {
				js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{
					Templates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
				}}
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers = []corev1.Container{{
					Name: "init", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/d"}},
				}}
			},
		},
		{
			name: "too many volumeClaimPolicies",
			mutate: func(js *jobset.JobSet) {
				js.Spec.VolumeClaimPolicies = make([]jobset.VolumeClaimPolicy, 51)
			},
			want: []wantErr{{errTooMany, vcp, ""}},
		},
		{
			name: "too many templates in one policy",
			mutate: func(js *jobset.JobSet) {
				js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{Templates: make([]corev1.PersistentVolumeClaim, 51)}}
			},
			// Upstream's maxItems; the empty templates are reported too.
			want: func() []wantErr {
				w := []wantErr{{errTooMany, vcp + "[0].templates", ""}}
				for i := 0; i < 51; i++ {
					w = append(w, wantErr{errRequired, fmt.Sprintf("%s[0].templates[%d].metadata.name", vcp, i), ""})
				}
				return w
			}(),
		},
		{
			name:   "duplicate claim names across policies",
			mutate: func(js *jobset.JobSet) { withClaims(js, "data"); withClaims(js, "data") },
			want:   []wantErr{{errDuplicate, vcp + "[1].templates[0].metadata.name", ""}},
		},
		{
			name:   "claim name not a DNS-1123 subdomain",
			mutate: func(js *jobset.JobSet) { withClaims(js, "Data") },
			want:   []wantErr{{errInvalid, vcp + "[0].templates[0].metadata.name", "RFC 1123"}},
		},
		{
			name: "claim name missing",
			mutate: func(js *jobset.JobSet) {
				js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{{}}}}
			},
			want: []wantErr{{errRequired, vcp + "[0].templates[0].metadata.name", ""}},
		},
		{
			// "<60>-js" has 63 characters.
			name:   "claim name at the limit",
			mutate: func(js *jobset.JobSet) { withClaims(js, strings.Repeat("c", 60)) },
		},
		{
			name:   "claim name too long with the JobSet name",
			mutate: func(js *jobset.JobSet) { withClaims(js, strings.Repeat("c", 61)) },
			want:   []wantErr{{errInvalid, vcp + "[0].templates[0].metadata.name", "no more than 63"}},
		},
		{
			name: "claim template with a namespace",
			mutate: func(js *jobset.JobSet) {
				withClaims(js, "data")
				js.Spec.VolumeClaimPolicies[0].Templates[0].Namespace = "other"
			},
			want: []wantErr{{errForbidden, vcp + "[0].templates[0].metadata.namespace", "must be empty"}},
		},
		{
			name: "pod volume named like a claim",
			mutate: func(js *jobset.JobSet) {
				withClaims(js, "data")
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes = []corev1.Volume{
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				}
			},
			want: []wantErr{{errInvalid, rj0 + ".template.spec.template.spec.volumes[1].name", "volumeClaimPolicies"}},
		},
		{
			name: "claim not mounted",
			mutate: func(js *jobset.JobSet) {
				withClaims(js, "data")
				js.Spec.VolumeClaimPolicies[0].Templates = append(js.Spec.VolumeClaimPolicies[0].Templates,
					corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "unused"}})
			},
			want: []wantErr{{errInvalid, vcp + "[0].templates[1].metadata.name", "must be mounted"}},
		},
		{
			name: "unsupported whenDeleted",
			mutate: func(js *jobset.JobSet) {
				withClaims(js, "data")
				js.Spec.VolumeClaimPolicies[0].RetentionPolicy.WhenDeleted = ptr.To[jobset.RetentionPolicyType]("Archive")
			},
			want: []wantErr{{errNotSupported, vcp + "[0].retentionPolicy.whenDeleted", ""}},
		},

		// Job template
		{
			name: "unsupported completionMode",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode = ptr.To[batchv1.CompletionMode]("Ordered")
			},
			want: []wantErr{{errNotSupported, rj0 + ".template.spec.completionMode", ""}},
		},
		{
			name: "negative parallelism",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](-1)
			},
			want: []wantErr{{errInvalid, rj0 + ".template.spec.parallelism", ""}},
		},
		{
			name: "negative completions",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](-1)
			},
			want: []wantErr{{errInvalid, rj0 + ".template.spec.completions", ""}},
		},
		{
			name: "invalid Job template label",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{"app": "not a value"}
			},
			want: []wantErr{{errInvalid, rj0 + ".template.metadata.labels", ""}},
		},
		{
			name: "invalid pod template annotation",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Annotations = map[string]string{"bad key!": "v"}
			},
			want: []wantErr{{errInvalid, rj1 + ".template.spec.template.metadata.annotations", ""}},
		},
		{
			name: "invalid pod template label",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"-bad": "v"}
			},
			want: []wantErr{{errInvalid, rj1 + ".template.spec.template.metadata.labels", ""}},
		},

		// ttlSecondsAfterFinished
		{
			name:   "zero ttlSecondsAfterFinished",
			mutate: func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](0) },
		},
		{
			name:   "negative ttlSecondsAfterFinished",
			mutate: func(js *jobset.JobSet) { js.Spec.TTLSecondsAfterFinished = ptr.To[int32](-5) },
			want:   []wantErr{{errInvalid, "spec.ttlSecondsAfterFinished", ""}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet()
			tc.mutate(js)
			checkErrors(t, ValidateJobSet(js), tc.want)
		})
	}
}

// TestValidateJobSetTemplateSchema: the required properties and enums of
// the embedded Kubernetes types, as upstream's CRD schema enforces them.
func TestValidateJobSetTemplateSchema(t *testing.T) {
	const pod0 = "spec.replicatedJobs[0].template.spec.template.spec"
	cases := []struct {
		name   string
		mutate func(js *jobset.JobSet)
		want   []wantErr
	}{
		{
			name:   "pod template without containers",
			mutate: func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = nil },
			want:   []wantErr{{errRequired, pod0 + ".containers", ""}},
		},
		{
			name: "required field of a nested type",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{},
				}}
			},
			want: []wantErr{{errRequired, pod0 + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", ""}},
		},
		{
			name: "enums",
			mutate: func(js *jobset.JobSet) {
				spec := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
				spec.RestartPolicy = "Sometimes"
				spec.Containers[0].ImagePullPolicy = "Rarely"
				spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "QUIC"}}
			},
			want: []wantErr{
				{errNotSupported, pod0 + ".restartPolicy", `"OnFailure"`},
				{errNotSupported, pod0 + ".containers[0].imagePullPolicy", `"IfNotPresent"`},
				{errNotSupported, pod0 + ".containers[0].ports[0].protocol", `"TCP"`},
			},
		},
		{
			name: "claim template enum",
			mutate: func(js *jobset.JobSet) {
				withClaims(js, "data")
				js.Spec.VolumeClaimPolicies[0].Templates[0].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
			},
			want: []wantErr{{errNotSupported, "spec.volumeClaimPolicies[0].templates[0].spec.accessModes[0]", ""}},
		},
		{
			name: "exclusive topology on the JobSet is not a label key",
			mutate: func(js *jobset.JobSet) {
				js.Annotations = map[string]string{jobset.ExclusiveKey: "not a key!"}
			},
			want: []wantErr{{errInvalid, "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]", "node label key"}},
		},
		{
			name: "exclusive topology on a template is not a label key",
			mutate: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Annotations = map[string]string{jobset.ExclusiveKey: "/rack"}
			},
			want: []wantErr{{errInvalid, "spec.replicatedJobs[1].template.metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]", "node label key"}},
		},
		{
			name: "exclusive topology is a label key",
			mutate: func(js *jobset.JobSet) {
				js.Annotations = map[string]string{jobset.ExclusiveKey: "cloud.google.com/gke-nodepool"}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet()
			tc.mutate(js)
			checkErrors(t, ValidateJobSet(js), tc.want)
		})
	}

	t.Run("update checks changed templates and annotations only", func(t *testing.T) {
		old := testJobSet()
		old.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.RestartPolicy = "Sometimes" // stored before the rule
		newJS := old.DeepCopy()
		newJS.Annotations = map[string]string{jobset.ExclusiveKey: "bad key"}
		newJS.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{"a": "b"}
		newJS.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = nil
		newJS.Spec.Suspend = ptr.To(true)
		old.Spec.Suspend = ptr.To(true)
		checkErrors(t, ValidateJobSetUpdate(newJS, old), []wantErr{
			{errInvalid, "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]", ""},
			// Removing containers is also a template change that the
			// default update strategy forbids; that error names the
			// field already and the schema's is not added.
			{errInvalid, pod0 + ".containers", "immutable"},
		})
		// Under an update strategy that accepts the edit, the schema
		// reports the missing containers; the unchanged template with an
		// invalid restartPolicy is not checked again.
		newJS.Spec.UpdatePolicy = &jobset.UpdatePolicy{UpdateStrategy: jobset.UpdateOpportunistic, RevisionHistoryLimit: ptr.To[int32](10)}
		old.Spec.UpdatePolicy = newJS.Spec.UpdatePolicy
		checkErrors(t, ValidateJobSetUpdate(newJS, old), []wantErr{
			{errInvalid, "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]", ""},
			{errRequired, pod0 + ".containers", ""},
		})
	})
}

// dependOnPredecessors adds replicatedJobs so that the last one depends on
// n earlier ones.
func dependOnPredecessors(js *jobset.JobSet, n int) {
	for len(js.Spec.ReplicatedJobs) < n {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, testRJ(fmt.Sprintf("rj%d", len(js.Spec.ReplicatedJobs)), 1, 1))
	}
	last := testRJ("last", 1, 1)
	for _, rj := range js.Spec.ReplicatedJobs[:n] {
		last.DependsOn = append(last.DependsOn, jobset.DependsOn{Name: rj.Name, Status: jobset.DependencyComplete})
	}
	js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, last)
}

func TestValidateJobSetReportsEveryError(t *testing.T) {
	js := testJobSet()
	js.Spec.ReplicatedJobs[0].Replicas = -1
	js.Spec.ReplicatedJobs[1].GroupName = "G"
	js.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1)
	errs := ValidateJobSet(js)
	checkErrors(t, errs, []wantErr{
		{errInvalid, "spec.replicatedJobs[0].replicas", ""},
		{errInvalid, "spec.replicatedJobs[1].groupName", ""},
		{errInvalid, "spec.ttlSecondsAfterFinished", ""},
	})
	for _, e := range errs {
		if e.Field == "" {
			t.Errorf("error without a path: %v", e)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	cond := func(typ jobset.JobSetConditionType, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: status}
	}
	cases := []struct {
		name   string
		status jobset.JobSetStatus
		want   bool
	}{
		{name: "new", want: false},
		{name: "completed", status: jobset.JobSetStatus{Conditions: []metav1.Condition{cond(jobset.JobSetCompleted, metav1.ConditionTrue)}}, want: true},
		{name: "failed", status: jobset.JobSetStatus{Conditions: []metav1.Condition{cond(jobset.JobSetFailed, metav1.ConditionTrue)}}, want: true},
		{name: "failed false", status: jobset.JobSetStatus{Conditions: []metav1.Condition{cond(jobset.JobSetFailed, metav1.ConditionFalse)}}, want: false},
		{name: "suspended", status: jobset.JobSetStatus{Conditions: []metav1.Condition{cond(jobset.JobSetSuspended, metav1.ConditionTrue)}}, want: false},
		{name: "terminal state", status: jobset.JobSetStatus{TerminalState: string(jobset.JobSetFailed)}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := testJobSet()
			js.Status = tc.status
			if got := IsTerminal(js); got != tc.want {
				t.Errorf("IsTerminal() = %v, want %v", got, tc.want)
			}
		})
	}
}
