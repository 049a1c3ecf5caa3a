package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes the YAML document of file that has the given kind
// into obj, rejecting unknown fields.
func decodeStrict(t *testing.T, file, kind string, obj any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no %s", file, kind)
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == kind {
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return
		}
	}
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// The scheduled backup reaches the embedded-etcd StatefulSet's pod and its
// data directory, and its Role allows exec into that pod alone.
func TestScheduledBackupMatchesTheStatefulSet(t *testing.T) {
	const dir = "components/scheduled-backup/"
	var sts appsv1.StatefulSet
	decodeStrict(t, "overlays/embedded-etcd/apiserver-statefulset.yaml", "StatefulSet", &sts)
	var cron batchv1.CronJob
	decodeStrict(t, dir+"backup-cronjob.yaml", "CronJob", &cron)
	var role rbacv1.Role
	decodeStrict(t, dir+"backup-rbac.yaml", "Role", &role)
	var binding rbacv1.RoleBinding
	decodeStrict(t, dir+"backup-rbac.yaml", "RoleBinding", &binding)

	pod := sts.Name + "-0"
	spec := cron.Spec.JobTemplate.Spec.Template.Spec
	args := spec.Containers[0].Args
	if got, _ := flagValue(args, "from-pod"); got != sts.Namespace+"/"+pod {
		t.Errorf("the CronJob takes the snapshot from pod %q, want %s/%s", got, sts.Namespace, pod)
	}
	want, _ := flagValue(sts.Spec.Template.Spec.Containers[0].Args, "embedded-etcd-dir")
	if got, ok := flagValue(args, "embedded-etcd-dir"); !ok || got != want {
		t.Errorf("the CronJob reads the embedded etcd in %q, the StatefulSet keeps it in %q", got, want)
	}
	if c, _ := flagValue(args, "container"); c != "" && c != sts.Spec.Template.Spec.Containers[0].Name {
		t.Errorf("the CronJob execs into container %q, the server's is %q", c, sts.Spec.Template.Spec.Containers[0].Name)
	} else if c == "" && sts.Spec.Template.Spec.Containers[0].Name != "apiserver" {
		t.Errorf("the CronJob relies on the default container apiserver, the server's is %q", sts.Spec.Template.Spec.Containers[0].Name)
	}
	if cron.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q: two backups at a time would share the claim", cron.Spec.ConcurrencyPolicy)
	}
	if spec.ServiceAccountName != binding.Subjects[0].Name || binding.RoleRef.Name != role.Name {
		t.Errorf("the CronJob runs as %q, the RoleBinding binds %q to Role %q (the Role is %q)",
			spec.ServiceAccountName, binding.Subjects[0].Name, binding.RoleRef.Name, role.Name)
	}
	execAllowed := false
	for _, rule := range role.Rules {
		if !slices.Equal(rule.ResourceNames, []string{pod}) {
			t.Errorf("a rule on %v names %v, want the server's pod %s alone", rule.Resources, rule.ResourceNames, pod)
		}
		if slices.Contains(rule.Resources, "pods/exec") && slices.Contains(rule.Verbs, "create") {
			execAllowed = true
		}
	}
	if !execAllowed {
		t.Error("the Role does not allow create on pods/exec, which the snapshot through the pod needs")
	}
	claim := spec.Volumes[0].PersistentVolumeClaim
	if claim == nil || claim.ClaimName != "jobset-apiserver-backups" {
		t.Errorf("the backups volume is %+v, want the claim jobset-apiserver-backups of backup-pvc.yaml", spec.Volumes[0])
	}
}
