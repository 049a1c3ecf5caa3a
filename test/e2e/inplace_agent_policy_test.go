package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/inplaceagent"
)

// The messages of artifacts/inplace-agent/admission-policy.yaml's rules.
const (
	refusedUnbound  = "the token is not bound to a pod"
	refusedOtherPod = "may only update its own pod"
	refusedChange   = "may only set the annotation jobset.sigs.k8s.io/in-place-restart-attempt"
)

// TestInPlaceAgentAdmissionPolicy: with the shipped RBAC and admission
// policy, the agents (one process per pod, each with a token bound to its
// pod) report their attempts and the barrier lifts, while the agent's
// identity can change nothing else: not another pod's annotation, not its
// own pod's image, labels or other annotations, and nothing at all with a
// token not bound to a pod.
func TestInPlaceAgentAdmissionPolicy(t *testing.T) {
	// Parallel tests run after the serial ones, which include those that
	// read the controller's process-wide counters.
	t.Parallel()
	ns := namespace(t)
	applyAgentRBAC(t, ns)
	installAgentPolicy(t, ns)
	js := inPlaceJobSet(ns, "ip", 1)
	// As in a real pod template: a token can only be bound to a pod that
	// runs with its service account.
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "jobset-inplace-agent"
	createJobSet(t, js)
	var pods []corev1.Pod
	eventually(t, 2*time.Minute, "4 pods of the JobSet", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = podsOf(ctx, ns, "ip")
		return err == nil && len(pods) == 4, nil
	})
	a, b := pods[0], pods[1]

	// A binding takes effect a moment after it is created: wait until the
	// policy refuses a token that is not bound to a pod. The probe write,
	// while the policy is not yet in force, is a label no one reads.
	unbound := agentClient(t, ns, nil)
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, lastErr = unbound.CoreV1().Pods(ns).Patch(ctx, a.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"policy-probe":"x"}}}`), metav1.PatchOptions{})
		return apierrors.IsForbidden(lastErr) && strings.Contains(lastErr.Error(), refusedUnbound), nil
	})
	if err != nil {
		t.Fatalf("the policy does not refuse a token not bound to a pod: %v; last answer: %v", err, lastErr)
	}

	// The agents' own reports pass: every agent reports attempt 0, the
	// controller lifts the barrier, and each worker (true) ends its agent
	// with 0.
	runAgents(t, ns, "ip", pods)
	waitStatus(t, ns, "ip", "barrier lifted at attempt 0", time.Minute, func(js *v1alpha2.JobSet) bool {
		return attemptIs(js, nil, ptr.To[int32](0))
	})

	boundToA := agentClient(t, ns, &a)
	attempt := func(v string) []byte {
		return []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha2.InPlaceRestartAttemptKey, v))
	}
	for _, tc := range []struct {
		name      string
		client    kubernetes.Interface
		pod       string
		patchType types.PatchType
		patch     []byte
		refused   string
	}{
		{"another pod's attempt", boundToA, b.Name, types.MergePatchType, attempt("1"), refusedOtherPod},
		{"another pod's label", boundToA, b.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), refusedOtherPod},
		{"its own pod's image", boundToA, a.Name, types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"registry.k8s.io/pause:3.9"}]`), refusedChange},
		{"its own pod's label", boundToA, a.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), refusedChange},
		{"another annotation of its own pod", boundToA, a.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), refusedChange},
		{"its attempt and another annotation", boundToA, a.Name, types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"1","x":"y"}}}`, v1alpha2.InPlaceRestartAttemptKey)), refusedChange},
		{"its attempt, not a number", boundToA, a.Name, types.MergePatchType, attempt("one"), refusedChange},
		{"its attempt removed", boundToA, a.Name, types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha2.InPlaceRestartAttemptKey)), refusedChange},
		{"an attempt with a token bound to no pod", unbound, a.Name, types.MergePatchType, attempt("1"), refusedUnbound},
	} {
		_, err := tc.client.CoreV1().Pods(ns).Patch(context.Background(), tc.pod, tc.patchType, tc.patch,
			metav1.PatchOptions{FieldManager: inplaceagent.FieldManager})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s: err = %v; want 403 Forbidden with %q", tc.name, err, tc.refused)
		}
	}

	// Nothing changed, and the agent's own write still passes.
	for _, p := range []corev1.Pod{a, b} {
		got, err := cluster.kube.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Annotations[v1alpha2.InPlaceRestartAttemptKey]; v != "0" {
			t.Errorf("pod %s: attempt %q, want 0", p.Name, v)
		}
		if got.Spec.Containers[0].Image != p.Spec.Containers[0].Image || got.Labels["x"] != "" || got.Annotations["x"] != "" {
			t.Errorf("pod %s changed: image %s, label x %q, annotation x %q", p.Name, got.Spec.Containers[0].Image, got.Labels["x"], got.Annotations["x"])
		}
	}
	patch, err := inplaceagent.AttemptPatch(1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := boundToA.CoreV1().Pods(ns).Patch(context.Background(), a.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: inplaceagent.FieldManager})
	if err != nil || got.Annotations[v1alpha2.InPlaceRestartAttemptKey] != "1" {
		t.Errorf("the agent's own report of attempt 1: err %v", err)
	}
}

// applyAgentRBAC applies artifacts/inplace-agent/rbac.yaml to ns.
func applyAgentRBAC(t *testing.T, ns string) {
	t.Helper()
	rbac, err := os.ReadFile(filepath.Join(cluster.root, "artifacts", "inplace-agent", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The manifest names namespace default; apply it to ns instead.
	manifest := strings.ReplaceAll(string(rbac), "namespace: default", "namespace: "+ns)
	if out, err := kubectlIn(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the agent RBAC: %v\n%s", err, out)
	}
}

// installAgentPolicy creates artifacts/inplace-agent/admission-policy.yaml
// under names of ns's own, its binding limited to ns: the shipped binding
// covers every namespace, and the other in-place tests' simulated restarts
// write an annotation the policy refuses.
func installAgentPolicy(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.root, "artifacts", "inplace-agent", "admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		var into any
		switch tm.Kind {
		case "ValidatingAdmissionPolicy":
			into = &policy
		case "ValidatingAdmissionPolicyBinding":
			into = &binding
		default:
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v", tm.Kind, err)
		}
	}
	name := "jobset-inplace-agent-" + ns
	policy.Name, binding.Name, binding.Spec.PolicyName = name, name, name
	if binding.Spec.MatchResources != nil {
		t.Fatal("the shipped binding already selects resources; the test's namespace selector would replace that")
	}
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
	}}
	ctx := context.Background()
	vap := cluster.kube.AdmissionregistrationV1()
	if _, err := vap.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the policy: %v", err)
	}
	t.Cleanup(func() {
		_ = vap.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := vap.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the policy binding: %v", err)
	}
	t.Cleanup(func() {
		_ = vap.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// A policy whose expressions do not compile refuses every request it
	// matches; say so here rather than through the checks' messages.
	eventually(t, time.Minute, "the policy's type check", func(ctx context.Context) (bool, error) {
		p, err := vap.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.TypeChecking == nil || p.Status.ObservedGeneration != p.Generation {
			return false, nil
		}
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			return false, fmt.Errorf("type check of the policy: %+v", w)
		}
		return true, nil
	})
}

// agentToken is a token of the agent's service account in ns, bound to pod
// when it is not nil (as the kubelet's projected token is).
func agentToken(t *testing.T, ns string, pod *corev1.Pod) string {
	t.Helper()
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}
	if pod != nil {
		spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := cluster.kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "jobset-inplace-agent",
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the agent: %v", err)
	}
	return tr.Status.Token
}

// agentClient is a client with the agent's configuration and a token of
// agentToken.
func agentClient(t *testing.T, ns string, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	cfg := inplaceagent.RESTConfig(&rest.Config{
		Host:            cluster.config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cluster.config.CAFile, CAData: cluster.config.CAData},
		BearerToken:     agentToken(t, ns, pod),
	})
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runAgents runs one agent process per pod, each with a token bound to its
// pod, and waits until all have ended with 0 (reported, passed the barrier,
// ran the worker true).
func runAgents(t *testing.T, ns, js string, pods []corev1.Pod) {
	t.Helper()
	dir := filepath.Join(cluster.localDir, "inplace-agents", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i := range pods {
		p := &pods[i]
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cluster.config.Host, CertificateAuthority: cluster.config.CAFile,
			CertificateAuthorityData: cluster.config.CAData}
		cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: agentToken(t, ns, p)}
		cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "agent", Namespace: ns}
		cfg.CurrentContext = "c"
		kubeconfig := filepath.Join(dir, p.Name+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(dir, p.Name+".log")
		log, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(cluster.root, "_output", "bin", "jobset-inplace-agent"),
			"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod="+p.Name, "--jobset="+js, "--worker-command=true")
		cmd.Stdout, cmd.Stderr = log, log
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer log.Close()
			if err := cmd.Run(); err != nil {
				out, _ := os.ReadFile(logPath)
				if len(out) > 2000 {
					out = out[len(out)-2000:]
				}
				errs[i] = fmt.Errorf("the agent of %s: %v; the end of its log:\n%s", p.Name, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
