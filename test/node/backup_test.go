package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
	"github.com/nativejobset/jobset/pkg/etcdsnapshot"
	"github.com/nativejobset/jobset/test/localcluster"
)

// The scheduled-backup component on the in-cluster install: its CronJob's
// Job, with only the component's RBAC, takes a snapshot of the running
// server's embedded etcd through pods/exec into its claim; the snapshot
// holds the JobSets that exist; the next run keeps only the newest
// (--keep=1 here) and says which one it removed.
func TestScheduledBackup(t *testing.T) {
	ns := cluster.Namespace(t, "backup")
	jobsets := []string{"backed-up-a", "backed-up-b", "backed-up-c"}
	for _, name := range jobsets {
		apply(t, ns, sleeperJobSet(name, 1))
	}
	backups := installScheduledBackup(t)

	first := runBackup(t, "backup-1")
	names, err := etcdsnapshot.Backups(backups)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 {
		t.Fatalf("after the first backup the claim holds %v, want one snapshot", names)
	}
	if !strings.Contains(first, "written to /backups/"+names[0]) || !strings.Contains(first, "checksum ok") {
		t.Errorf("the backup's log does not name %s and its check:\n%s", names[0], first)
	}
	got := jobSetsInSnapshot(t, filepath.Join(backups, names[0]), ns)
	for _, name := range jobsets {
		if !slices.Contains(got, name) {
			t.Errorf("the snapshot holds JobSets %v of %s, without %s", got, ns, name)
		}
	}

	second := runBackup(t, "backup-2")
	after, err := etcdsnapshot.Backups(backups)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0] == names[0] {
		t.Fatalf("after the second backup the claim holds %v, want only a newer snapshot than %s", after, names[0])
	}
	if !strings.Contains(second, "removed the old snapshot "+names[0]) {
		t.Errorf("the second backup's log does not say it removed %s:\n%s", names[0], second)
	}
}

// installScheduledBackup applies artifacts/deploy/components/scheduled-backup
// with this checkout's server image, on the real node, keeping one
// snapshot, and a volume on the node for its claim; it returns the host
// directory behind the claim. Everything is removed when the test ends.
func installScheduledBackup(t *testing.T) string {
	t.Helper()
	refs, err := localcluster.ImageRefs(cluster.Root)
	if err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(cluster.Root, "artifacts", "deploy", "components", "scheduled-backup")
	keepArg := keepArgIndex(t, filepath.Join(component, "backup-cronjob.yaml"))
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, component)
	if err != nil {
		t.Fatal(err)
	}
	const pod = "/spec/jobTemplate/spec/template/spec"
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
components:
- %s
patches:
- target: {kind: CronJob, name: jobset-apiserver-backup}
  patch: |-
    - {op: replace, path: %s/containers/0/image, value: %s}
    - {op: replace, path: %s/containers/0/imagePullPolicy, value: Never}
    - {op: replace, path: %s/containers/0/args/%d, value: --keep=1}
    - {op: add, path: %s/tolerations, value: [{key: jobset.local/real-node, operator: Exists, effect: NoSchedule}]}
    - {op: add, path: %s/nodeSelector, value: {jobset.local/real-node: "true"}}
`, filepath.ToSlash(rel), pod, refs["jobset-apiserver"], pod, pod, keepArg, pod, pod)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}

	backups, err := cluster.NodeVolume("jobset-apiserver-backups", "jobset-apiserver-backups", true)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl("", "apply", "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k (the scheduled-backup component): %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = cluster.Kubectl("", "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=2m")
		_, _ = cluster.Kubectl("", "delete", "pv", "jobset-apiserver-backups", "--ignore-not-found")
	})
	return backups
}

// keepArgIndex is the index of the --keep argument of the shipped CronJob.
func keepArgIndex(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cron batchv1.CronJob
	if err := yaml.UnmarshalStrict(data, &cron); err != nil {
		t.Fatal(err)
	}
	args := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--keep=") })
	if i < 0 {
		t.Fatalf("%s: the CronJob passes no --keep (args %v)", file, args)
	}
	return i
}

// runBackup starts a Job from the CronJob, as `kubectl create job --from`
// does for an unscheduled run, waits for it to succeed and returns its
// pod's log.
func runBackup(t *testing.T, name string) string {
	t.Helper()
	kubectl(t, "-n", localcluster.SystemNamespace, "create", "job", name, "--from=cronjob/jobset-apiserver-backup")
	var done *batchv1.Job
	eventually(t, 3*time.Minute, "the backup Job "+name+" to finish", func(ctx context.Context) (bool, error) {
		j, err := cluster.Kube.BatchV1().Jobs(localcluster.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		done = j
		return j.Status.Succeeded > 0 || j.Status.Failed > 0, nil
	})
	pods, err := cluster.Kube.CoreV1().Pods(localcluster.SystemNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the pods of backup Job %s: %v (%d found)", name, err, len(pods.Items))
	}
	var logs strings.Builder
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			logs.WriteString(podLogs(t, localcluster.SystemNamespace, p.Name))
		}
	}
	if done.Status.Succeeded == 0 {
		t.Fatalf("the backup Job %s failed:\n%s", name, logs.String())
	}
	return logs.String()
}

// jobSetsInSnapshot restores a snapshot into a new data directory, starts
// an etcd on it, and returns the names of the JobSets of namespace ns that
// it stores.
func jobSetsInSnapshot(t *testing.T, snapshot, ns string) []string {
	t.Helper()
	base, err := os.MkdirTemp("", "restored") // short enough for the etcd socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dataDir := filepath.Join(base, "etcd")
	if _, err := etcdsnapshot.Restore(etcdsnapshot.RestoreOptions{Snapshot: snapshot, DataDir: dataDir, Member: etcdsnapshot.EmbeddedMember()}); err != nil {
		t.Fatalf("restoring %s: %v", snapshot, err)
	}
	srv, err := embeddedetcd.Start(embeddedetcd.Config{Dir: dataDir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The keys are <etcd prefix>/<group>/jobsets/<namespace>/<name>.
	resp, err := cli.Get(context.Background(), "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	marker := "/jobsets/" + ns + "/"
	var names []string
	for _, kv := range resp.Kvs {
		if _, name, ok := strings.Cut(string(kv.Key), marker); ok {
			names = append(names, name)
		}
	}
	return names
}
