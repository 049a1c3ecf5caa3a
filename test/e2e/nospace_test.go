package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apiserver"
	"github.com/nativejobset/jobset/test/localcluster"
)

const apiServiceName = "v1alpha2.jobset.x-k8s.io"

// The embedded etcd's NOSPACE alarm as users meet it through kube-apiserver.
// jobset-apiserver is restarted with a 40 MiB quota (and a short
// maintenance interval) on its data directory, and JobSets of about 1 MiB
// fill it until a create is refused. Then, through the aggregator: a create
// gets 507 naming NOSPACE (client-go and kubectl), gets, lists and deletes
// work, jobset-apiserver's /readyz stays ready and the APIService
// Available, a Warning Event on the APIService says so, and the metric is
// 1. Once the JobSets are deleted the alarm clears by itself (a Normal
// Event, metric 0) and creates work again. The server is restarted with
// its usual command line afterwards.
func TestNospaceThroughKubeAPIServer(t *testing.T) {
	// Not parallel: the JobSet API is away while jobset-apiserver restarts,
	// and its writes are refused while the alarm is raised.
	const quota = 40 << 20
	ctx := context.Background()
	start := time.Now().Add(-time.Second).Truncate(time.Second)
	orig, err := stack.Process("jobset-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	small := *orig
	small.Args = append(slices.Clone(orig.Args),
		fmt.Sprintf("--embedded-etcd-quota-backend-bytes=%d", quota),
		"--embedded-etcd-maintenance-interval=2s")
	restartAPIServer(t, &small, "a 40 MiB embedded etcd quota for "+t.Name())
	t.Cleanup(func() { restartAPIServer(t, orig, "restored after "+t.Name()) })

	ns := namespace(t)
	jobsets := cluster.jobsets.JobsetV1alpha2().JobSets(ns)
	// Filling: each JobSet carries ~1 MiB in a container argument (under
	// the 1.5 MiB storage limit). Another controller manages it, so
	// jobset-controller creates no Jobs for it.
	big := strings.Repeat("x", 1<<20)
	var refused error
	created := 0
	for i := 0; i < 3*quota>>20 && refused == nil; i++ {
		js := simpleJobSet(ns, fmt.Sprintf("fill-%03d", i))
		js.Spec.ManagedBy = ptr.To("example.com/not-jobset-controller")
		js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Args = []string{big}
		if _, err := jobsets.Create(ctx, js, metav1.CreateOptions{}); err != nil {
			refused = err
			break
		}
		created++
	}
	if refused == nil {
		t.Fatalf("%d JobSets of 1 MiB (three times the quota) were stored without a refusal", created)
	}
	t.Logf("the create after %d JobSets of 1 MiB was refused: %v", created, refused)
	var status apierrors.APIStatus
	if !errors.As(refused, &status) || status.Status().Code != http.StatusInsufficientStorage ||
		status.Status().Reason != "InsufficientStorage" || !strings.Contains(status.Status().Message, "NOSPACE") {
		t.Fatalf("the refusal through kube-apiserver: %#v; want code 507, reason InsufficientStorage, a message naming NOSPACE", refused)
	}
	if created < 2 {
		t.Fatalf("only %d JobSets were stored before the refusal; the test needs two to get and delete", created)
	}

	// What kubectl users see.
	out, err := kubectlIn(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"small"},
"spec":{"suspend":true,"replicatedJobs":[{"name":"w","template":{"spec":{"template":{"spec":{"restartPolicy":"Never",
"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10"}]}}}}}]}}`, "create", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(out, "InsufficientStorage") || !strings.Contains(out, "NOSPACE") {
		t.Errorf("kubectl create under the alarm: %v\n%s\nwant a refusal naming InsufficientStorage and NOSPACE", err, out)
	}
	t.Logf("kubectl create under the alarm: %s", strings.TrimSpace(out))

	// Reads and deletes work.
	if _, err := jobsets.Get(ctx, "fill-000", metav1.GetOptions{}); err != nil {
		t.Errorf("get under the alarm: %v", err)
	}
	// etcd applies the write that crosses the quota and still answers
	// NOSPACE for it (its quota applier), so the refused JobSet may exist.
	list := kubectl(t, "get", "jobsets", "-n", ns)
	refusedName := fmt.Sprintf("\nfill-%03d ", created)
	if n := strings.Count(list, "\nfill-"); n != created && !(n == created+1 && strings.Contains(list, refusedName)) {
		t.Errorf("kubectl get jobsets under the alarm listed %d JobSets; want the %d created (and perhaps the refused one):\n%s", n, created, list)
	} else if n == created+1 {
		t.Logf("the JobSet whose create was refused was stored (etcd applied the write that crossed the quota)")
	}
	kubectl(t, "delete", "jobset", "fill-001", "-n", ns)
	if _, err := jobsets.Get(ctx, "fill-001", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("fill-001 after its delete under the alarm: %v; want NotFound", err)
	}

	// Readiness is not affected: with one replica a failing /readyz
	// would take the API away, the deletes above included.
	if code, body := jobsetAPIServerGet(t, "/readyz"); code != http.StatusOK {
		t.Errorf("jobset-apiserver /readyz under the alarm: %d %s; want 200", code, body)
	}
	if cond := kubectl(t, "get", "apiservice", apiServiceName,
		"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`); cond != "True" {
		t.Errorf("APIService Available under the alarm: %q, want True", cond)
	}
	waitMetric(t, "jobset_apiserver_embedded_etcd_nospace_alarm 1")
	raised := waitAPIServiceEvent(t, start, corev1.EventTypeWarning, apiserver.ReasonNoSpaceAlarm)
	t.Logf("event: %s %s: %s", raised.Type, raised.Reason, raised.Message)
	if desc := kubectl(t, "describe", "apiservice", apiServiceName); !strings.Contains(desc, apiserver.ReasonNoSpaceAlarm) {
		t.Errorf("kubectl describe apiservice does not show the %s Event:\n%s", apiserver.ReasonNoSpaceAlarm, desc)
	}

	// Freeing the space disarms the alarm without an operator.
	kubectl(t, "delete", "jobsets", "--all", "-n", ns)
	waitMetric(t, "jobset_apiserver_embedded_etcd_nospace_alarm 0")
	cleared := waitAPIServiceEvent(t, start, corev1.EventTypeNormal, apiserver.ReasonNoSpaceAlarmCleared)
	t.Logf("event: %s %s: %s", cleared.Type, cleared.Reason, cleared.Message)
	js := simpleJobSet(ns, "after")
	js.Spec.ManagedBy = ptr.To("example.com/not-jobset-controller")
	if _, err := jobsets.Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Errorf("create after the alarm cleared: %v", err)
	}
}

// restartAPIServer kills jobset-apiserver and starts it with p's command
// line, then waits until it is ready and kube-apiserver serves JobSets
// through it again.
func restartAPIServer(t *testing.T, p *localcluster.Process, why string) {
	t.Helper()
	running, err := stack.Process("jobset-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Restart(p, why); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "jobset-apiserver /readyz", func(context.Context) (bool, error) {
		code, _ := jobsetAPIServerGet(t, "/readyz")
		return code == http.StatusOK, nil
	})
	eventually(t, 2*time.Minute, "JobSets listed through kube-apiserver", func(ctx context.Context) (bool, error) {
		_, err := cluster.jobsets.JobsetV1alpha2().JobSets("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// jobsetAPIServerGet GETs a path of jobset-apiserver's own port with the
// admin's credentials and returns the code and body (code 0 when it could
// not be reached).
func jobsetAPIServerGet(t *testing.T, path string) (int, string) {
	t.Helper()
	cfg := rest.CopyConfig(cluster.config)
	cfg.Host = "https://127.0.0.1:" + stackEnv(t, "JOBSET_APISERVER_PORT")
	// Its serving certificate is for the Service's name; the client
	// certificate is what matters here.
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.Insecure = nil, "", true
	cfg.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var code int
	body, err := kube.Discovery().RESTClient().Get().AbsPath(path).Do(context.Background()).StatusCode(&code).Raw()
	if err != nil && code == 0 {
		return 0, err.Error()
	}
	return code, string(body)
}

// waitMetric polls jobset-apiserver's /metrics until it has the line.
func waitMetric(t *testing.T, line string) {
	t.Helper()
	eventually(t, 2*time.Minute, "jobset-apiserver's metric "+line, func(context.Context) (bool, error) {
		code, body := jobsetAPIServerGet(t, "/metrics")
		return code == http.StatusOK && slices.Contains(strings.Split(body, "\n"), line), nil
	})
}

// waitAPIServiceEvent waits for an Event of the reason on the JobSet
// APIService, with its UID, recorded at or after since.
func waitAPIServiceEvent(t *testing.T, since time.Time, typ, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	eventually(t, 2*time.Minute, "a "+reason+" Event on the APIService", func(ctx context.Context) (bool, error) {
		uid, err := kubectlErr("get", "apiservice", apiServiceName, "-o", "jsonpath={.metadata.uid}")
		if err != nil {
			return false, nil
		}
		events, err := cluster.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "APIService", "involvedObject.name": apiServiceName, "reason": reason}.String(),
		})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.LastTimestamp.Time.Before(since) || string(e.InvolvedObject.UID) != uid {
				continue
			}
			if e.Type != typ || e.Source.Component != "jobset-apiserver" {
				return false, fmt.Errorf("event %s: type %s, source %q; want %s from jobset-apiserver", e.Name, e.Type, e.Source.Component, typ)
			}
			found = e
			return true, nil
		}
		return false, nil
	})
	return found
}
