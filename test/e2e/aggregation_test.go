package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const simpleExample = "artifacts/examples/simple.yaml"

func TestAPIResourcesListJobSets(t *testing.T) {
	out := kubectl(t, "api-resources", "--api-group=jobset.x-k8s.io", "-o", "wide")
	for _, want := range []string{"jobsets", "js", "jobset.x-k8s.io/v1alpha2", "true", "JobSet"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl api-resources lacks %q:\n%s", want, out)
		}
	}
	cond := kubectl(t, "get", "apiservice", "v1alpha2.jobset.x-k8s.io",
		"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	if cond != "True" {
		t.Errorf("APIService Available = %q, want True", cond)
	}
}

func TestKubectlLifecycle(t *testing.T) {
	ns := namespace(t)
	manifest := cluster.root + "/" + simpleExample

	kubectl(t, "apply", "-n", ns, "-f", manifest)
	out := kubectl(t, "get", "jobsets", "-n", ns)
	for _, col := range []string{"NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE", "simple"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get jobsets lacks %q:\n%s", col, out)
		}
	}
	wide := kubectl(t, "get", "js", "simple", "-n", ns, "-o", "wide")
	for _, col := range []string{"READY", "ATTEMPTS"} {
		if !strings.Contains(wide, col) {
			t.Errorf("kubectl get -o wide lacks %q:\n%s", col, wide)
		}
	}
	desc := kubectl(t, "describe", "jobset", "simple", "-n", ns)
	for _, want := range []string{"Replicated Jobs", "workers"} {
		if !strings.Contains(desc, want) {
			t.Errorf("kubectl describe lacks %q:\n%s", want, desc)
		}
	}
	explain := kubectl(t, "explain", "jobsets.spec.replicatedJobs")
	for _, want := range []string{"replicatedJobs", "template", "dependsOn"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain lacks %q:\n%s", want, explain)
		}
	}

	// A merge patch as `kubectl edit` would send, then server-side apply of
	// the same manifest: both go through kube-apiserver to our server.
	kubectl(t, "patch", "jobset", "simple", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"team":"ml"}}}`)
	if got := kubectl(t, "get", "js", "simple", "-n", ns, "-o", "jsonpath={.metadata.labels.team}"); got != "ml" {
		t.Errorf("label after patch = %q, want ml", got)
	}
	kubectl(t, "apply", "--server-side", "--force-conflicts", "-n", ns, "-f", manifest)
	managers := kubectl(t, "get", "js", "simple", "-n", ns, "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if !strings.Contains(managers, "kubectl") {
		t.Errorf("managed fields after server-side apply name no kubectl manager: %q", managers)
	}

	// Validation errors come back through kube-apiserver with their field path.
	out, err := kubectlErr("patch", "jobset", "simple", "-n", ns, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/managedBy","value":"not a path"}]`)
	if err == nil || !strings.Contains(out, "spec.managedBy") {
		t.Errorf("invalid patch: err=%v, output lacks spec.managedBy:\n%s", err, out)
	}

	kubectl(t, "delete", "jobset", "simple", "-n", ns, "--wait=true", "--timeout=60s")
	if _, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(context.Background(), "simple", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

func TestRBACIsDelegated(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+simpleExample)

	out, err := kubectlErr("--as=alice", "get", "jobsets", "-n", ns)
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("alice without a role: err=%v output=%s, want forbidden", err, out)
	}
	kubectl(t, "create", "role", "jobset-reader", "-n", ns, "--verb=get,list,watch", "--resource=jobsets.jobset.x-k8s.io")
	kubectl(t, "create", "rolebinding", "alice-reads", "-n", ns, "--role=jobset-reader", "--user=alice")
	// Authorization decisions are cached for a few seconds by the server.
	eventually(t, time.Minute, "alice to be allowed", func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("--as=alice", "get", "jobsets", "-n", ns, "-o", "name")
		return err == nil && strings.Contains(out, "jobset.jobset.x-k8s.io/simple"), nil
	})
	out, err = kubectlErr("--as=alice", "delete", "jobset", "simple", "-n", ns)
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("alice deleting with a read-only role: err=%v output=%s, want forbidden", err, out)
	}
}

func TestNamespaceDeletionRemovesJobSets(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+simpleExample)
	kubectl(t, "delete", "namespace", ns, "--wait=false")
	eventually(t, 3*time.Minute, "the namespace's JobSets to be deleted", func(ctx context.Context) (bool, error) {
		list, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
	eventually(t, 3*time.Minute, "the namespace to be gone", func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestGarbageCollectorFollowsJobSets(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	kubectl(t, "apply", "-n", ns, "-f", cluster.root+"/"+simpleExample)
	js, err := cluster.jobsets.JobsetV1alpha2().JobSets(ns).Get(ctx, "simple", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owned","ownerReferences":[{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","name":"simple","uid":"` + string(js.UID) + `"}]}}`
	if out, err := kubectlIn(cm, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("creating the owned ConfigMap: %v\n%s", err, out)
	}
	kubectl(t, "delete", "jobset", "simple", "-n", ns)
	eventually(t, 2*time.Minute, "the garbage collector to delete the owned ConfigMap", func(ctx context.Context) (bool, error) {
		_, err := cluster.kube.CoreV1().ConfigMaps(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
