package inplaceagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ExitCodeAnnotation carries the exit code of a simulated container exit.
// The local cluster's kwok stage restarts the pod's containers when it
// appears (restartCount up, Ready off and on) and removes it.
const ExitCodeAnnotation = "inplace-restart.stage.kwok.x-k8s.io/exit-code"

// SignalExit writes the exit code on the pod and waits until the annotation
// is gone again, that is until the container restart it stands for is done.
func SignalExit(ctx context.Context, kube kubernetes.Interface, namespace, pod string, code int) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ExitCodeAnnotation: strconv.Itoa(code),
	}}})
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("signalling exit code %d on pod %s: %w", code, pod, err)
	}
	sel := fields.OneTermEqualSelector("metadata.name", pod).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return kube.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return kube.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if e.Type == watch.Deleted {
			return false, fmt.Errorf("pod %s was deleted", pod)
		}
		_, pending := p.Annotations[ExitCodeAnnotation]
		return !pending, nil
	})
	return err
}
