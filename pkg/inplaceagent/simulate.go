package inplaceagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ExitCodeAnnotation carries the exit code of a simulated container exit.
// The local cluster's kwok stage restarts the pod's containers when it
// appears (restartCount up, Ready off and on) and removes it.
const ExitCodeAnnotation = "inplace-restart.stage.kwok.x-k8s.io/exit-code"

// SignalExit writes the exit code on the pod and waits until the annotation
// is gone again, that is until the container restart it stands for is done.
// Reading the pod needs get on pods, which the agent's Role does not grant:
// this is for the local cluster's tests only.
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
	// Polls rather than watches: a watch that is refused would retry
	// forever instead of reporting the error.
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return false, fmt.Errorf("waiting for the restart of pod %s: %w", pod, err)
			}
			return false, nil
		}
		_, pending := p.Annotations[ExitCodeAnnotation]
		return !pending, nil
	})
}
