package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nativejobset/jobset/pkg/controller/placement"
)

// placer is what the controller needs of topology placement (package
// placement): run it, and ask whether a JobSet's Jobs wait for a domain.
// The Jobs' pods are gated for it when they are built (placement.GateJob).
type placer interface {
	Run(ctx context.Context, workers int)
	WaitFor(jobSetKey string) (placement.Wait, bool)
}

// updatePlacementCondition reports on the JobSet whether some of its Jobs
// wait for a topology domain (an event goes with every change).
func (c *Controller) updatePlacementCondition(s *syncState, key string, now metav1.Time) {
	w, ok := c.placer.WaitFor(key)
	if !ok {
		s.setCondition(placement.ConditionPending, metav1.ConditionFalse, placement.ReasonPlaced, placement.MessagePlaced, corev1.EventTypeNormal, now)
		return
	}
	eventType := corev1.EventTypeNormal
	if w.Reason == placement.ReasonTimeout {
		eventType = corev1.EventTypeWarning
	}
	s.setCondition(placement.ConditionPending, metav1.ConditionTrue, w.Reason, w.Message, eventType, now)
}
