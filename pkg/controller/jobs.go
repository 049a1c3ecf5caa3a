package controller

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/placement"
)

// jobSetKind is the kind written into the owner references of child objects.
const jobSetKind = "JobSet"

// jobName is the name of the child Job with index jobIdx of a replicatedJob.
func jobName(jsName, rjName string, jobIdx int) string {
	// Not fmt.Sprintf: every sync names each Job it wants, and Sprintf's
	// allocations were most of a sync's once the Jobs existed.
	return jsName + "-" + rjName + "-" + strconv.Itoa(jobIdx)
}

// jobHashKey identifies a Job across namespaces: the SHA-1 hex digest of
// "<namespace>/<jobName>", as upstream computes it.
func jobHashKey(namespace, name string) string {
	sum := sha1.Sum([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:])
}

// replicas of a replicatedJob; an absent value means one.
func replicasOf(rj *jobset.ReplicatedJob) int32 {
	if rj.Replicas == nil {
		return 1
	}
	if *rj.Replicas < 0 {
		return 0
	}
	return *rj.Replicas
}

func groupOf(rj *jobset.ReplicatedJob) string {
	if rj.GroupName == "" {
		return jobset.DefaultGroupName
	}
	return rj.GroupName
}

// subdomain is the name of the headless Service and the pods' subdomain.
func subdomain(js *jobset.JobSet) string {
	if js.Spec.Network != nil && js.Spec.Network.Subdomain != "" {
		return js.Spec.Network.Subdomain
	}
	return js.Name
}

// dnsHostnamesEnabled says whether pods get stable hostnames through a
// headless Service (defaulted to true by the API server).
func dnsHostnamesEnabled(js *jobset.JobSet) bool {
	if js.Spec.Network == nil || js.Spec.Network.EnableDNSHostnames == nil {
		return true
	}
	return *js.Spec.Network.EnableDNSHostnames
}

// coordinatorEndpoint is the stable DNS name of the coordinator pod.
func coordinatorEndpoint(js *jobset.JobSet) string {
	c := js.Spec.Coordinator
	return fmt.Sprintf("%s-%s-%d-%d.%s", js.Name, c.ReplicatedJob, c.JobIndex, c.PodIndex, subdomain(js))
}

// indexLayout holds the precomputed global and group positions of every
// replicatedJob, so labels of many Jobs are computed in O(1) each.
type indexLayout struct {
	globalReplicas int32
	globalOffset   map[string]int32
	groupOffset    map[string]int32
	groupReplicas  map[string]int32
}

func newIndexLayout(js *jobset.JobSet) *indexLayout {
	l := &indexLayout{
		globalOffset:  map[string]int32{},
		groupOffset:   map[string]int32{},
		groupReplicas: map[string]int32{},
	}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		r := replicasOf(rj)
		g := groupOf(rj)
		l.globalOffset[rj.Name] = l.globalReplicas
		l.groupOffset[rj.Name] = l.groupReplicas[g]
		l.globalReplicas += r
		l.groupReplicas[g] += r
	}
	return l
}

// jobParams are the per-attempt values stamped on a new Job.
type jobParams struct {
	restarts         int32
	jobRestarts      int32
	executionAttempt int32
	// templateRevision names the ControllerRevision of the templates the
	// Job is built from; empty when unknown.
	templateRevision string
	suspend          bool
	// priority of the Job's pods, labelled on them; nil when unknown.
	priority *int32
}

// childMetadata returns the labels and annotations that every child Job and
// its pod template carry. execution-attempt is an annotation only, as in
// upstream.
func childMetadata(js *jobset.JobSet, layout *indexLayout, rj *jobset.ReplicatedJob, jobIdx int, p jobParams) (labels, annotations map[string]string) {
	name := jobName(js.Name, rj.Name, jobIdx)
	g := groupOf(rj)
	common := map[string]string{
		jobset.JobSetNameKey:         js.Name,
		jobset.JobSetUIDKey:          string(js.UID),
		jobset.ReplicatedJobNameKey:  rj.Name,
		jobset.ReplicatedJobReplicas: strconv.Itoa(int(replicasOf(rj))),
		jobset.JobIndexKey:           strconv.Itoa(jobIdx),
		jobset.JobGlobalIndexKey:     strconv.Itoa(int(layout.globalOffset[rj.Name]) + jobIdx),
		jobset.GlobalReplicasKey:     strconv.Itoa(int(layout.globalReplicas)),
		jobset.GroupNameKey:          g,
		jobset.GroupReplicasKey:      strconv.Itoa(int(layout.groupReplicas[g])),
		jobset.JobGroupIndexKey:      strconv.Itoa(int(layout.groupOffset[rj.Name]) + jobIdx),
		jobset.JobKey:                jobHashKey(js.Namespace, name),
		jobset.RestartsKey:           strconv.Itoa(int(p.restarts)),
		jobset.JobRestartsKey:        strconv.Itoa(int(p.jobRestarts)),
	}
	if js.Spec.Coordinator != nil {
		common[jobset.CoordinatorKey] = coordinatorEndpoint(js)
	}
	labels = make(map[string]string, len(common))
	annotations = make(map[string]string, len(common)+1)
	for k, v := range common {
		labels[k] = v
		annotations[k] = v
	}
	annotations[jobset.ExecutionAttemptKey] = strconv.Itoa(int(p.executionAttempt))
	if p.templateRevision != "" {
		annotations[jobset.TemplateRevisionKey] = p.templateRevision
	}
	// Exclusive placement is requested per JobSet or per replicatedJob and
	// travels as annotations only. The template's topology key wins; a
	// node-selector strategy requested at either level applies, as upstream.
	for _, src := range []map[string]string{js.Annotations, rj.Template.Annotations} {
		if topology, ok := src[jobset.ExclusiveKey]; ok {
			annotations[jobset.ExclusiveKey] = topology
			if v, ok := src[jobset.NodeSelectorStrategyKey]; ok {
				annotations[jobset.NodeSelectorStrategyKey] = v
			}
		}
	}
	return labels, annotations
}

// applyNodeSelectorStrategy pins the pods of a Job to nodes labelled ahead
// of time with <namespace>_<job> and tolerates their taint, when the
// nodeSelector flavour of exclusive placement is requested.
func applyNodeSelectorStrategy(job *batchv1.Job) {
	_, exclusive := job.Annotations[jobset.ExclusiveKey]
	_, strategy := job.Annotations[jobset.NodeSelectorStrategyKey]
	if !exclusive || !strategy {
		return
	}
	pod := &job.Spec.Template.Spec
	pod.NodeSelector = mergeInto(pod.NodeSelector, map[string]string{jobset.NamespacedJobKey: job.Namespace + "_" + job.Name})
	pod.Tolerations = append(pod.Tolerations, corev1.Toleration{
		Key: jobset.NoScheduleTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
}

func mergeInto(dst map[string]string, src map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// ownerRef is the controller reference of child objects.
func ownerRef(js *jobset.JobSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         jobset.SchemeGroupVersion.String(),
		Kind:               jobSetKind,
		Name:               js.Name,
		UID:                js.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// constructJob builds child Job jobIdx of replicatedJob rj.
func constructJob(js *jobset.JobSet, layout *indexLayout, rj *jobset.ReplicatedJob, jobIdx int, p jobParams) *batchv1.Job {
	labels, annotations := childMetadata(js, layout, rj, jobIdx, p)
	tmpl := rj.Template.DeepCopy()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(js.Name, rj.Name, jobIdx),
			Namespace:       js.Namespace,
			Labels:          mergeInto(tmpl.Labels, labels),
			Annotations:     mergeInto(tmpl.Annotations, annotations),
			OwnerReferences: []metav1.OwnerReference{ownerRef(js)},
		},
		Spec: tmpl.Spec,
	}
	job.Spec.Template.Labels = mergeInto(job.Spec.Template.Labels, labels)
	job.Spec.Template.Annotations = mergeInto(job.Spec.Template.Annotations, annotations)
	job.Spec.Suspend = ptr.To(p.suspend)
	if dnsHostnamesEnabled(js) {
		job.Spec.Template.Spec.Subdomain = subdomain(js)
	}
	injectClaimVolumes(js, &job.Spec.Template.Spec)
	applyNodeSelectorStrategy(job)
	applyPriorityLabel(job, p.priority)
	placement.GateJob(job)
	applyInPlaceLabel(js, job)
	return job
}

// jobFinished returns the terminal condition type of a Job, or "".
func jobFinished(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func jobSuspended(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false)
}

// childJobs sorts the Jobs owned by a JobSet.
type childJobs struct {
	// Jobs of the current attempt.
	active     []*batchv1.Job
	successful []*batchv1.Job
	failed     []*batchv1.Job
	// Jobs of an earlier attempt (whole-set or per-Job) that still have to
	// be deleted.
	previous []*batchv1.Job
	// Jobs already being deleted; they still block their names.
	deleting []*batchv1.Job
	// Every owned Job by name.
	byName map[string]*batchv1.Job
	// Set when the cache holds Jobs of an attempt newer than the JobSet's
	// status: the JobSet cache is behind.
	staleJobSet bool
}

// current returns the Jobs of the current attempt.
func (c *childJobs) current() []*batchv1.Job {
	out := make([]*batchv1.Job, 0, len(c.active)+len(c.successful)+len(c.failed))
	out = append(out, c.active...)
	out = append(out, c.successful...)
	return append(out, c.failed...)
}

func labelInt(job *batchv1.Job, key string) (int32, bool) {
	return intLabel(job.Labels, key)
}

// intLabel reads a label holding an int32.
func intLabel(labels map[string]string, key string) (int32, bool) {
	v, ok := labels[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

func jobRestartsFor(status *jobset.JobSetStatus, rjName string, idx int32) int32 {
	for i := range status.ReplicatedJobsStatus {
		s := &status.ReplicatedJobsStatus[i]
		if s.Name == rjName {
			if idx >= 0 && int(idx) < len(s.JobRestarts) {
				return s.JobRestarts[idx]
			}
			return 0
		}
	}
	return 0
}

// classifyJobs sorts jobs (already filtered to the ones owned by js) by attempt
// and state. Jobs are returned in name order for determinism.
func classifyJobs(js *jobset.JobSet, jobs []*batchv1.Job) *childJobs {
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
	c := &childJobs{byName: make(map[string]*batchv1.Job, len(jobs))}
	for _, job := range jobs {
		c.byName[job.Name] = job
		if job.DeletionTimestamp != nil {
			c.deleting = append(c.deleting, job)
			continue
		}
		attempt, ok := labelInt(job, jobset.RestartsKey)
		if !ok || attempt < js.Status.Restarts {
			c.previous = append(c.previous, job)
			continue
		}
		if attempt > js.Status.Restarts {
			c.staleJobSet = true
			continue
		}
		if idx, ok := labelInt(job, jobset.JobIndexKey); ok {
			want := jobRestartsFor(&js.Status, job.Labels[jobset.ReplicatedJobNameKey], idx)
			got, _ := labelInt(job, jobset.JobRestartsKey)
			if got < want {
				c.previous = append(c.previous, job)
				continue
			}
			if got > want {
				c.staleJobSet = true
				continue
			}
		}
		switch jobFinished(job) {
		case batchv1.JobComplete:
			c.successful = append(c.successful, job)
		case batchv1.JobFailed:
			c.failed = append(c.failed, job)
		default:
			c.active = append(c.active, job)
		}
	}
	return c
}

// isOwnedBy reports whether js is the controller of obj.
func isOwnedBy(refs []metav1.OwnerReference, js *jobset.JobSet) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID == js.UID && r.Kind == jobSetKind {
			return true
		}
	}
	return false
}
