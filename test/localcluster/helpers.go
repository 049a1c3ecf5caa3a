package localcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 250 ms until it holds, and fails the test
// when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// Namespace creates a namespace named after base for one test and deletes
// it when the test ends, unless the test failed and <Prefix>KEEP_CLUSTER=1
// asks to keep what it left for a look.
func (c *Cluster) Namespace(t *testing.T, base string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", base, time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !t.Failed() || !c.keepFailed {
			_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	return name
}
