package controller

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller/jobcache"
)

func TestJobHashKeyIsSHA1(t *testing.T) {
	// Reference values from `printf 'default/js-workers-1' | sha1sum`.
	if got := jobHashKey("default", "js-workers-1"); got != "20dc345bc2e84bd8edbf2a3c1e402ea64730add9" {
		t.Fatalf("jobHashKey = %s", got)
	}
	if got := jobHashKey("default", "js-leader-0"); got != "fa35219ba3b909f11c52cb9f99aec8247a2e4d27" {
		t.Fatalf("jobHashKey = %s", got)
	}
}

func TestConstructJob(t *testing.T) {
	grouped := func(js *jobset.JobSet) {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rjob("ps", 3))
		js.Spec.ReplicatedJobs[1].GroupName = "train"
		js.Spec.ReplicatedJobs[2].GroupName = "train"
	}
	cases := []struct {
		name      string
		mods      []func(*jobset.JobSet)
		rj        int
		idx       int
		params    jobParams
		wantName  string
		wantLabel map[string]string // every JobSet key on Job and pod labels
		absent    []string
		wantAnno  map[string]string // annotation-only keys
		subdomain string
	}{
		{
			name: "first worker, defaults", rj: 1, idx: 1,
			params:   jobParams{},
			wantName: "js-workers-1",
			wantLabel: map[string]string{
				jobset.JobSetNameKey:         "js",
				jobset.JobSetUIDKey:          "uid-js",
				jobset.ReplicatedJobNameKey:  "workers",
				jobset.ReplicatedJobReplicas: "2",
				jobset.JobIndexKey:           "1",
				jobset.JobGlobalIndexKey:     "2",
				jobset.GlobalReplicasKey:     "3",
				jobset.GroupNameKey:          "default",
				jobset.GroupReplicasKey:      "3",
				jobset.JobGroupIndexKey:      "2",
				jobset.JobKey:                "20dc345bc2e84bd8edbf2a3c1e402ea64730add9",
				jobset.RestartsKey:           "0",
				// Written on the first attempt too, as upstream.
				jobset.JobRestartsKey: "0",
			},
			absent:    []string{jobset.CoordinatorKey, jobset.ExecutionAttemptKey, jobset.PriorityKey},
			wantAnno:  map[string]string{jobset.ExecutionAttemptKey: "0"},
			subdomain: "js",
		},
		{
			name: "groups, restarts, per-Job restart, coordinator, custom subdomain",
			mods: []func(*jobset.JobSet){grouped, func(js *jobset.JobSet) {
				js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "leader", JobIndex: 0, PodIndex: 1}
				js.Spec.Network = &jobset.Network{Subdomain: "net"}
			}},
			rj: 2, idx: 2,
			params:   jobParams{restarts: 3, jobRestarts: 2, executionAttempt: 5, suspend: true},
			wantName: "js-ps-2",
			wantLabel: map[string]string{
				jobset.ReplicatedJobNameKey:  "ps",
				jobset.ReplicatedJobReplicas: "3",
				jobset.JobIndexKey:           "2",
				jobset.JobGlobalIndexKey:     "5",
				jobset.GlobalReplicasKey:     "6",
				jobset.GroupNameKey:          "train",
				jobset.GroupReplicasKey:      "5",
				jobset.JobGroupIndexKey:      "4",
				jobset.RestartsKey:           "3",
				jobset.JobRestartsKey:        "2",
				jobset.CoordinatorKey:        "js-leader-0-1.net",
				jobset.JobKey:                jobHashKey(ns, "js-ps-2"),
			},
			wantAnno:  map[string]string{jobset.ExecutionAttemptKey: "5"},
			subdomain: "net",
		},
		{
			name: "DNS hostnames disabled",
			mods: []func(*jobset.JobSet){func(js *jobset.JobSet) {
				js.Spec.Network = &jobset.Network{EnableDNSHostnames: ptr.To(false)}
			}},
			rj: 0, idx: 0, wantName: "js-leader-0",
			wantLabel: map[string]string{jobset.JobGlobalIndexKey: "0", jobset.JobGroupIndexKey: "0"},
			wantAnno:  map[string]string{jobset.ExecutionAttemptKey: "0"},
			subdomain: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", tc.mods...)
			rj := &js.Spec.ReplicatedJobs[tc.rj]
			job := constructJob(js, newIndexLayout(js), rj, tc.idx, tc.params)
			if job.Name != tc.wantName || job.Namespace != ns {
				t.Fatalf("name = %s/%s", job.Namespace, job.Name)
			}
			for k, v := range tc.wantLabel {
				for where, m := range map[string]map[string]string{
					"job labels": job.Labels, "pod labels": job.Spec.Template.Labels,
				} {
					if m[k] != v {
						t.Errorf("%s[%s] = %q, want %q", where, k, m[k], v)
					}
				}
				for where, m := range map[string]map[string]string{
					"job annotations": job.Annotations, "pod annotations": job.Spec.Template.Annotations,
				} {
					if m[k] != v {
						t.Errorf("%s[%s] = %q, want %q", where, k, m[k], v)
					}
				}
			}
			for _, k := range tc.absent {
				if _, ok := job.Labels[k]; ok {
					t.Errorf("label %s set", k)
				}
				if _, ok := job.Spec.Template.Labels[k]; ok {
					t.Errorf("pod label %s set", k)
				}
			}
			for k, v := range tc.wantAnno {
				if job.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, job.Annotations[k], v)
				}
				if job.Spec.Template.Annotations[k] != v {
					t.Errorf("pod annotation %s = %q, want %q", k, job.Spec.Template.Annotations[k], v)
				}
			}
			if job.Labels["tmpl"] != "label" || job.Annotations["tmpl"] != "annotation" {
				t.Errorf("Job template metadata lost: %v %v", job.Labels, job.Annotations)
			}
			if job.Spec.Template.Labels["pod"] != "label" {
				t.Errorf("pod template labels lost: %v", job.Spec.Template.Labels)
			}
			if job.Spec.Template.Spec.Subdomain != tc.subdomain {
				t.Errorf("subdomain = %q, want %q", job.Spec.Template.Spec.Subdomain, tc.subdomain)
			}
			if got := ptr.Deref(job.Spec.Suspend, false); got != tc.params.suspend {
				t.Errorf("suspend = %v", got)
			}
			want := []metav1.OwnerReference{{
				APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "uid-js",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}
			if !reflect.DeepEqual(job.OwnerReferences, want) {
				t.Errorf("ownerReferences = %+v", job.OwnerReferences)
			}
			// The template is not modified.
			if _, ok := rj.Template.Labels[jobset.JobSetNameKey]; ok {
				t.Errorf("template mutated")
			}
		})
	}
}

func TestClassifyJobs(t *testing.T) {
	js := newJobSet("js")
	js.Status.Restarts = 1
	js.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{0, 2}}}
	mk := func(name, rj, idx, attempt, jobAttempt string, mods ...func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			jobset.ReplicatedJobNameKey: rj, jobset.JobIndexKey: idx, jobset.RestartsKey: attempt,
		}}}
		if jobAttempt != "" {
			j.Labels[jobset.JobRestartsKey] = jobAttempt
		}
		for _, m := range mods {
			m(j)
		}
		return j
	}
	now := metav1.Now()
	jobs := classifyJobs(js, []*batchv1.Job{
		mk("old", "leader", "0", "0", ""),
		mk("bad", "leader", "0", "x", ""),
		mk("leader", "leader", "0", "1", ""),
		mk("w0", "workers", "0", "1", "", completeJob),
		mk("w1-old", "workers", "1", "1", "1"),
		mk("w1", "workers", "1", "1", "2", failJob("BackoffLimitExceeded", "", t0)),
		mk("gone", "workers", "1", "1", "2", func(j *batchv1.Job) { j.DeletionTimestamp = &now }),
	})
	names := func(l []*batchv1.Job) []string {
		var out []string
		for _, j := range l {
			out = append(out, j.Name)
		}
		return out
	}
	check := func(what string, got []*batchv1.Job, want ...string) {
		t.Helper()
		if !reflect.DeepEqual(names(got), want) {
			t.Errorf("%s = %v, want %v", what, names(got), want)
		}
	}
	check("active", jobs.active, "leader")
	check("successful", jobs.successful, "w0")
	check("failed", jobs.failed, "w1")
	check("previous", jobs.previous, "bad", "old", "w1-old")
	check("deleting", jobs.deleting, "gone")
	if jobs.staleJobSet {
		t.Errorf("stale")
	}
	if !classifyJobs(js, []*batchv1.Job{mk("new", "leader", "0", "2", "")}).staleJobSet {
		t.Errorf("a Job of a newer attempt must mark the JobSet cache stale")
	}
}

func TestComputeReplicatedJobsStatus(t *testing.T) {
	js := newJobSet("js")
	js.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "workers", JobRestarts: []int32{1}}}
	lbl := func(rj string) map[string]string { return map[string]string{jobset.ReplicatedJobNameKey: rj} }
	jobs := &childJobs{
		active: []*batchv1.Job{
			// ready: 1 ready + 1 succeeded >= min(2, 2)
			{ObjectMeta: metav1.ObjectMeta{Labels: lbl("workers")}, Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2)},
				Status: batchv1.JobStatus{Ready: ptr.To[int32](1), Succeeded: 1, Active: 1}},
			// not ready, suspended
			{ObjectMeta: metav1.ObjectMeta{Labels: lbl("workers")}, Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](3), Suspend: ptr.To(true)},
				Status: batchv1.JobStatus{Ready: ptr.To[int32](2)}},
			// unknown replicatedJob: ignored
			{ObjectMeta: metav1.ObjectMeta{Labels: lbl("nope")}, Status: batchv1.JobStatus{Active: 1}},
		},
		successful: []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Labels: lbl("leader")}}},
		failed:     []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Labels: lbl("workers")}}},
	}
	got := computeReplicatedJobsStatus(js, jobs)
	want := []jobset.ReplicatedJobStatus{
		{Name: "leader", Succeeded: 1},
		// The smallest parallelism of the unfinished workers Jobs.
		{Name: "workers", Ready: 1, Active: 1, Suspended: 1, Failed: 1, JobRestarts: []int32{1}, ObservedParallelism: ptr.To[int32](2)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestInjectClaimVolumes(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{
			Templates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, {ObjectMeta: metav1.ObjectMeta{Name: "unused"}}},
		}}
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d"}}
	})
	job := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[0], 0, jobParams{})
	want := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-js"}}}}
	if !reflect.DeepEqual(job.Spec.Template.Spec.Volumes, want) {
		t.Fatalf("volumes = %+v", job.Spec.Template.Spec.Volumes)
	}
	other := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[1], 0, jobParams{})
	if len(other.Spec.Template.Spec.Volumes) != 0 {
		t.Fatalf("volume injected into a pod that does not mount it")
	}
}

func TestTrimObject(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3), Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"p": "q"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"p": "q"}}},
		Status: batchv1.JobStatus{Active: 2},
	}
	out, _ := trimObject(job)
	j, _ := jobcache.Of(out)
	if j.ManagedFields != nil || len(j.Spec.Template.Spec.Containers) != 0 || j.Spec.Template.Labels != nil || j.Spec.Selector != nil {
		t.Fatalf("not trimmed: %+v", j)
	}
	if *j.Spec.Parallelism != 3 || !*j.Spec.Suspend || j.Status.Active != 2 {
		t.Fatalf("trimmed too much: %+v", j)
	}
	if j.Labels != nil {
		t.Fatalf("labels not read are kept: %v", j.Labels)
	}

	// A child Job keeps exactly the labels and annotations that are read.
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Annotations = map[string]string{jobset.ExclusiveKey: "rack"}
	})
	child := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[0], 1, jobParams{restarts: 2, templateRevision: "js-abc"})
	out, _ = trimObject(child.DeepCopy())
	j, _ = jobcache.Of(out)
	for key := range jobLabelsRead {
		if j.Labels[key] != child.Labels[key] || child.Labels[key] == "" {
			t.Errorf("label %s: %q, built %q", key, j.Labels[key], child.Labels[key])
		}
	}
	if len(j.Labels) != len(jobLabelsRead) {
		t.Errorf("labels kept %v", j.Labels)
	}
	for _, key := range []string{jobset.ExecutionAttemptKey, jobset.TemplateRevisionKey, jobset.ExclusiveKey} {
		if j.Annotations[key] != child.Annotations[key] || child.Annotations[key] == "" {
			t.Errorf("annotation %s: %q, built %q", key, j.Annotations[key], child.Annotations[key])
		}
	}
	if _, ok := j.Annotations[jobset.JobKey]; ok || len(j.Annotations) >= len(child.Annotations) {
		t.Errorf("annotations kept %v", j.Annotations)
	}
}

func TestExclusivePlacementAnnotations(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Annotations = map[string]string{jobset.ExclusiveKey: "rack"}
		js.Spec.ReplicatedJobs[1].Template.Annotations[jobset.ExclusiveKey] = "zone"
		js.Spec.ReplicatedJobs[1].Template.Annotations[jobset.NodeSelectorStrategyKey] = "true"
	})
	l := newIndexLayout(js)
	leader := constructJob(js, l, &js.Spec.ReplicatedJobs[0], 0, jobParams{})
	if leader.Annotations[jobset.ExclusiveKey] != "rack" || leader.Spec.Template.Annotations[jobset.ExclusiveKey] != "rack" {
		t.Fatalf("leader annotations = %v", leader.Annotations)
	}
	if _, ok := leader.Labels[jobset.ExclusiveKey]; ok || leader.Spec.Template.Spec.NodeSelector != nil {
		t.Fatalf("exclusive key must be an annotation only, without node selector strategy")
	}
	w := constructJob(js, l, &js.Spec.ReplicatedJobs[1], 1, jobParams{})
	if w.Annotations[jobset.ExclusiveKey] != "zone" || w.Spec.Template.Spec.NodeSelector[jobset.NamespacedJobKey] != "default_js-workers-1" {
		t.Fatalf("worker = %v %v", w.Annotations, w.Spec.Template.Spec.NodeSelector)
	}
	if tl := w.Spec.Template.Spec.Tolerations; len(tl) != 1 || tl[0].Key != jobset.NoScheduleTaintKey || tl[0].Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("tolerations = %+v", tl)
	}
}

// A JobSet-level node-selector strategy applies to a replicatedJob whose
// template sets its own exclusive-topology key, as upstream.
func TestExclusiveTemplateKeepsJobSetNodeSelectorStrategy(t *testing.T) {
	js := newJobSet("js", func(js *jobset.JobSet) {
		js.Annotations = map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"}
		js.Spec.ReplicatedJobs[1].Template.Annotations[jobset.ExclusiveKey] = "zone"
	})
	w := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[1], 0, jobParams{})
	if w.Annotations[jobset.ExclusiveKey] != "zone" || w.Annotations[jobset.NodeSelectorStrategyKey] != "true" {
		t.Fatalf("annotations = %v", w.Annotations)
	}
	if w.Spec.Template.Spec.NodeSelector[jobset.NamespacedJobKey] != "default_js-workers-0" {
		t.Fatalf("nodeSelector = %v", w.Spec.Template.Spec.NodeSelector)
	}
	if len(w.Spec.Template.Spec.SchedulingGates) != 0 {
		t.Fatalf("gated under the node-selector strategy: %v", w.Spec.Template.Spec.SchedulingGates)
	}
}

// The pods carry jobset.sigs.k8s.io/priority, resolved as the Priority
// admission plugin resolves it, and not under the node-selector strategy.
func TestPriorityLabel(t *testing.T) {
	classes := []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		{ObjectMeta: metav1.ObjectMeta{Name: "neg"}, Value: -5},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-low"}, Value: 10, GlobalDefault: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-lower"}, Value: 7, GlobalDefault: true},
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, pc := range classes {
		if err := idx.Add(pc); err != nil {
			t.Fatal(err)
		}
	}
	lister := schedulinglisters.NewPriorityClassLister(idx)
	empty := schedulinglisters.NewPriorityClassLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	cases := []struct {
		name   string
		lister schedulinglisters.PriorityClassLister
		spec   corev1.PodSpec
		want   string // "" when no label
	}{
		{"class value", lister, corev1.PodSpec{PriorityClassName: "high"}, "1000"},
		{"negative value", lister, corev1.PodSpec{PriorityClassName: "neg"}, "n5"},
		{"explicit priority wins", lister, corev1.PodSpec{PriorityClassName: "high", Priority: ptr.To[int32](3)}, "3"},
		{"global default, lowest", lister, corev1.PodSpec{}, "7"},
		{"no classes at all", empty, corev1.PodSpec{}, "0"},
		{"unknown class", lister, corev1.PodSpec{PriorityClassName: "missing"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := newJobSet("js", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = tc.spec })
			p := jobParams{}
			if v, ok := podPriority(tc.lister, &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec); ok {
				p.priority = &v
			}
			job := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[0], 0, p)
			got, ok := job.Spec.Template.Labels[jobset.PriorityKey]
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("pod label %s = %q (set %v), want %q", jobset.PriorityKey, got, ok, tc.want)
			}
			if _, onJob := job.Labels[jobset.PriorityKey]; onJob {
				t.Fatalf("priority label on the Job; upstream puts it on pods only")
			}
		})
	}
	t.Run("node-selector strategy", func(t *testing.T) {
		js := newJobSet("js", func(js *jobset.JobSet) {
			js.Annotations = map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"}
		})
		job := constructJob(js, newIndexLayout(js), &js.Spec.ReplicatedJobs[0], 0, jobParams{priority: ptr.To[int32](1)})
		if _, ok := job.Spec.Template.Labels[jobset.PriorityKey]; ok {
			t.Fatalf("priority label set under the node-selector strategy")
		}
	})
}
