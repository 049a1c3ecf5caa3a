// Package process tests jobset-apiserver as a separate process: signals,
// exit, and restarts on the same data directory.
package process

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/test/integration/framework"
)

const waitTimeout = time.Minute

// SIGTERM with many watches open: /readyz fails while every watch is still
// open (so the APIService stops routing here first), then the watches end,
// the process exits 0 after closing the embedded etcd, and a restart on the
// same directory finds the stored JobSet.
func TestSIGTERMWithOpenWatches(t *testing.T) {
	dir := t.TempDir()
	p := framework.StartProcess(t, dir)
	ctx := context.Background()
	jobsets := p.Client.JobsetV1alpha2().JobSets("default")
	created, err := jobsets.Create(ctx, newJobSet("default", "kept"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	const watches = 100
	var ended atomic.Int32
	allEnded := make(chan struct{})
	for i := 0; i < watches; i++ {
		w, err := jobsets.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		go func(w watch.Interface) {
			for range w.ResultChan() {
			}
			if ended.Add(1) == watches {
				close(allEnded)
			}
		}(w)
	}

	start := time.Now()
	p.Signal(t, syscall.SIGTERM)

	var endedWhenUnready int32 = -1
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := p.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return false, nil
		}
		endedWhenUnready = ended.Load()
		return true, nil
	})
	if err != nil {
		t.Fatalf("/readyz kept answering ok after SIGTERM: %v", err)
	}
	if endedWhenUnready != 0 {
		t.Errorf("%d watches had ended before /readyz failed; want readiness to drop first", endedWhenUnready)
	}

	select {
	case <-allEnded:
	case <-time.After(waitTimeout):
		t.Fatalf("only %d of %d watches ended after SIGTERM", ended.Load(), watches)
	}
	select {
	case <-p.Exited():
	case <-time.After(waitTimeout):
		t.Fatal("the process did not exit after SIGTERM")
	}
	t.Logf("SIGTERM with %d watches: exited after %v", watches, time.Since(start))
	if err := p.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if !strings.Contains(p.Log.String(), "Embedded etcd stopped") {
		t.Errorf("the embedded etcd was not closed before exit; output:\n%s", p.Log.String())
	}

	p = framework.StartProcess(t, dir)
	got, err := p.Client.JobsetV1alpha2().JobSets("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("after restart: uid %s rv %s, want %s %s", got.UID, got.ResourceVersion, created.UID, created.ResourceVersion)
	}
}
