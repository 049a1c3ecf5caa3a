package inplaceagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// ExitCodeAnnotation carries the exit code of a simulated container exit.
// The local cluster's kwok stage restarts the pod's containers when it
// appears (restartCount up, Ready off and on) and removes it.
const ExitCodeAnnotation = "inplace-restart.stage.kwok.x-k8s.io/exit-code"

// SignalExit writes the exit code on the pod and waits until the annotation
// is gone again, that is until the container restart it stands for is done.
// Reading the pod needs get and watch on pods, which the agent's Role does
// not grant: this is for the local cluster's tests only.
func SignalExit(ctx context.Context, kube kubernetes.Interface, namespace, pod string, code int) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ExitCodeAnnotation: strconv.Itoa(code),
	}}})
	if err != nil {
		return err
	}
	p, err := kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("signalling exit code %d on pod %s: %w", code, pod, err)
	}
	if err := waitExitHandled(ctx, kube, p); err != nil {
		return fmt.Errorf("waiting for the restart of pod %s: %w", pod, err)
	}
	return nil
}

// waitExitHandled watches the pod, from the version written by the signal,
// until the exit code annotation is gone. A watch that ends early is opened
// again from the last version seen (or from a fresh read when that version
// is too old); a refused read or a deleted pod is an error.
func waitExitHandled(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) error {
	pods := kube.CoreV1().Pods(p.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", p.Name).String()
	rv := p.ResourceVersion
	delay := 50 * time.Millisecond
	for {
		if rv == "" {
			cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil && permanent(err) {
				return err
			}
			if err == nil {
				if _, pending := cur.Annotations[ExitCodeAnnotation]; !pending {
					return nil
				}
				rv = cur.ResourceVersion
			}
		}
		if rv != "" {
			w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil && permanent(err) {
				return err
			}
			if err == nil {
				done, next, err := drainPodWatch(w, rv)
				w.Stop()
				if done || err != nil {
					return err
				}
				rv = next
				delay = 50 * time.Millisecond
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// drainPodWatch reads a watch of one pod until the exit code annotation is
// gone (done), the pod is deleted (an error) or the watch ends; next is the
// version to watch from again, "" after a watch error (e.g. the version
// is too old).
func drainPodWatch(w watch.Interface, rv string) (done bool, next string, err error) {
	next = rv
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Deleted:
			return false, "", fmt.Errorf("the pod was deleted")
		case watch.Error:
			return false, "", nil
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		next = p.ResourceVersion
		if ev.Type == watch.Bookmark {
			continue
		}
		if _, pending := p.Annotations[ExitCodeAnnotation]; !pending {
			return true, next, nil
		}
	}
	return false, next, nil
}

func permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}
