package apiserver

import (
	"context"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Events about the embedded etcd's NOSPACE alarm. They regard the
// APIService through which kube-apiserver serves JobSets, the object an
// operator checks for an aggregated API's health; being cluster-scoped, its
// Events are in the namespace "default", where `kubectl get events -A` and
// `kubectl describe apiservice v1alpha2.jobset.x-k8s.io` show them.
const (
	apiServiceName = "v1alpha2.jobset.x-k8s.io"
	// ReasonNoSpaceAlarm is a Warning: JobSet writes are refused.
	ReasonNoSpaceAlarm = "NoSpaceAlarm"
	// ReasonNoSpaceAlarmCleared is Normal: writes work again.
	ReasonNoSpaceAlarmCleared = "NoSpaceAlarmCleared"
	eventComponent            = "jobset-apiserver"
)

var apiServicesResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// nospaceEvents turns the embedded etcd's alarm changes into Events. The
// alarm can be raised while the embedded etcd starts, before the server has
// a cluster client, so changes are only remembered here, and run records
// the latest state once it can. Recording never blocks the maintenance.
type nospaceEvents struct {
	mu      sync.Mutex
	raised  bool
	message string
	wake    chan struct{}
}

func newNospaceEvents() *nospaceEvents {
	return &nospaceEvents{wake: make(chan struct{}, 1)}
}

// alarmChanged is the embedded etcd's OnAlarmChange hook.
func (n *nospaceEvents) alarmChanged(raised bool, message string) {
	n.mu.Lock()
	n.raised, n.message = raised, message
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run records an Event whenever the alarm's state differs from the one
// last recorded (at first: not raised), until ctx ends. Quick flaps
// between two wake-ups are coalesced into the latest state.
func (n *nospaceEvents) run(ctx context.Context, recorder record.EventRecorder, regarding func(context.Context) *corev1.ObjectReference) {
	recorded := false
	for {
		n.mu.Lock()
		raised, message := n.raised, n.message
		n.mu.Unlock()
		if raised != recorded {
			if raised {
				recorder.Event(regarding(ctx), corev1.EventTypeWarning, ReasonNoSpaceAlarm, message)
			} else {
				recorder.Event(regarding(ctx), corev1.EventTypeNormal, ReasonNoSpaceAlarmCleared, message)
			}
			recorded = raised
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
	}
}

// start sends the Events through kube until ctx ends.
func (n *nospaceEvents) start(ctx context.Context, kube kubernetes.Interface, meta metadata.Interface) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	host, _ := os.Hostname()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent, Host: host})
	go func() {
		defer broadcaster.Shutdown()
		n.run(ctx, recorder, apiServiceRef(meta))
	}()
}

// apiServiceRef returns the reference to the APIService with its UID, so
// that `kubectl describe` finds the Events; without the UID (the
// APIService cannot be read) they are still recorded.
func apiServiceRef(meta metadata.Interface) func(context.Context) *corev1.ObjectReference {
	return func(ctx context.Context) *corev1.ObjectReference {
		ref := &corev1.ObjectReference{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: apiServiceName}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		obj, err := meta.Resource(apiServicesResource).Get(ctx, apiServiceName, metav1.GetOptions{})
		if err != nil {
			klog.ErrorS(err, "Reading the APIService for the NOSPACE alarm's Event; recording it without the UID", "apiService", apiServiceName)
			return ref
		}
		ref.UID = obj.UID
		return ref
	}
}
