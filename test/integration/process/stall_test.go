package process

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nativejobset/jobset/test/integration/framework"
)

// A stalled etcd (SIGSTOP) makes requests end with a timeout (504), not
// hang and not 500, and /readyz fail; once etcd runs again (SIGCONT) the
// same server process serves reads and writes again, without a restart.
func TestStalledEtcdTimesOutThenRecovers(t *testing.T) {
	dir := t.TempDir()
	etcd, url := framework.StartEtcdProcess(t, filepath.Join(dir, "external-etcd"))
	p := framework.StartProcess(t, dir, "--etcd-servers="+url, "--request-timeout=3s")
	ctx := context.Background()
	jobsets := p.Client.JobsetV1alpha2().JobSets("default")
	if _, err := jobsets.Create(ctx, newJobSet("default", "before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := etcd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	i := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		i++
		_, err := jobsets.Create(ctx, newJobSet("default", fmt.Sprintf("during-%d", i)), metav1.CreateOptions{})
		if err == nil {
			return false, nil // etcd had not stalled yet
		}
		code := int32(0)
		if st, ok := err.(apierrors.APIStatus); ok {
			code = st.Status().Code
		}
		if code != http.StatusGatewayTimeout {
			return false, fmt.Errorf("a write to a stalled etcd: %v (code %d), want 504", err, code)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
		t.Errorf("/readyz answered ok with etcd stalled")
	}
	if err := etcd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd stalled for %v", time.Since(stopped))

	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := jobsets.Create(ctx, newJobSet("default", "after"), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("writes did not recover after SIGCONT: %v", err)
	}
	if _, err := jobsets.Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("reading the JobSet written before the stall: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := p.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("/readyz did not recover: %v", err)
	}
	select {
	case <-p.Exited():
		t.Errorf("the server exited: %v", p.ExitErr())
	default:
	}
}
