// Package inplaceagent is the per-pod side of restartStrategy InPlaceRestart.
//
// The agent runs in every pod of a JobSet. When it starts (that is, every
// time its container starts) it writes the restart attempt its pod enters on
// the pod annotation jobset.sigs.k8s.io/in-place-restart-attempt:
//
//   - in a pod that has no attempt yet (a new pod: the JobSet's first start,
//     a scale-up, a replacement, a resume), the attempt under way: 0 at
//     first, status.currentInPlaceRestartAttempt afterwards, or one past
//     previousInPlaceRestartAttempt while a restart is in progress; a new
//     pod joins and starts no restart;
//   - in a pod whose container restarted, currentInPlaceRestartAttempt + 1.
//
// It then watches its JobSet:
//
//   - while the pod's attempt differs from currentInPlaceRestartAttempt the
//     workload waits at the barrier;
//   - once they are equal the barrier lifts: the worker command starts
//     (wrapper mode) or the startup probe starts answering (sidecar mode);
//   - once previousInPlaceRestartAttempt reaches the pod's attempt, the agent
//     ends with the in-place restart exit code, so that the kubelet restarts
//     the pod's containers in place.
//
// A JobSet that does not restart in place gets no barrier at all and no
// report. One that carries the annotation
// jobset.sigs.k8s.io/disable-in-place-restart gets its attempts reported
// (so that the controller still tracks them and enforces maxRestarts) but
// no barrier and no restart of healthy containers.
package inplaceagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
)

// FieldManager names the agent's writes to its pod.
const FieldManager = "jobset-inplace-agent"

// RESTConfig is the client configuration the agent uses, from cfg: it
// names the agent to the server and speaks protobuf (JSON is still
// accepted), since every pod of a JobSet runs an agent and each of its
// starts reads the JobSet and writes its pod.
func RESTConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = FieldManager
	out.ContentType = runtime.ContentTypeProtobuf
	out.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return out
}

// Config says which pod the agent serves and how.
type Config struct {
	Namespace string
	PodName   string
	JobSet    string
	// RestartExitCode is what the agent ends with to restart its pod in
	// place.
	RestartExitCode int
	// WorkerCommand, when set, is run with Shell -c once the barrier lifts
	// (wrapper mode); the agent then ends with its exit code.
	WorkerCommand string
	// Shell runs WorkerCommand (see WorkerShell); empty means /bin/sh.
	Shell string
	// LiftBarrier is called once when the barrier lifts in sidecar mode
	// (WorkerCommand empty), e.g. to start the startup probe server.
	LiftBarrier func()
	// Logf logs; nil uses the log package.
	Logf func(format string, args ...any)
}

// Agent drives one pod.
type Agent struct {
	cfg  Config
	kube kubernetes.Interface
	js   versioned.Interface

	// restarted is whether the pod already had an attempt when the agent
	// started (its container restarted, as opposed to a new pod); valid
	// once podRead is closed.
	restarted bool
	podRead   chan struct{}

	mu       sync.Mutex
	attempt  *int32
	lifted   bool
	retrying bool
	latest   *jobset.JobSet
	done     chan int // the exit code, once
	once     sync.Once
}

// New returns an agent for cfg.
func New(cfg Config, kube kubernetes.Interface, js versioned.Interface) *Agent {
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	return &Agent{cfg: cfg, kube: kube, js: js, done: make(chan int, 1), podRead: make(chan struct{})}
}

// Attempt is the attempt the agent reported, nil before it did.
func (a *Agent) Attempt() *int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attempt == nil {
		return nil
	}
	v := *a.attempt
	return &v
}

// Lifted reports whether the barrier is lifted.
func (a *Agent) Lifted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lifted
}

// Run watches the JobSet until the agent must end and returns the exit code
// it must end with: the in-place restart code, the worker's exit code, or
// 1 when ctx ends first.
func (a *Agent) Run(ctx context.Context) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The pod is read while the JobSet's watch opens: a start costs the
	// slower of the two, not both.
	go func() {
		a.restarted = a.podRestarted(ctx)
		close(a.podRead)
	}()
	go a.watch(ctx)
	select {
	case code := <-a.done:
		return code
	case <-ctx.Done():
		return 1
	}
}

// watch feeds every state of the JobSet to observe, one at a time, until
// ctx ends. The first watch is opened without a resourceVersion, so that it
// starts with the JobSet's current state: a start costs one request instead
// of an informer's list and watch, and every container restart is a start.
// A watch that ends is opened again from the last version seen; one whose
// version has expired starts over with the current state.
func (a *Agent) watch(ctx context.Context) {
	jobSets := a.js.JobsetV1alpha2().JobSets(a.cfg.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", a.cfg.JobSet).String()
	rv := ""
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		w, err := jobSets.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.cfg.Logf("watching JobSet %s: %v", a.cfg.JobSet, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 5*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
		rv = a.drain(ctx, w, rv)
		w.Stop()
	}
}

// drain reads one watch until it ends and returns the version to go on
// from.
func (a *Agent) drain(ctx context.Context, w watch.Interface, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Error:
				a.cfg.Logf("watching JobSet %s: %v", a.cfg.JobSet, apierrors.FromObject(ev.Object))
				return ""
			case watch.Added, watch.Modified, watch.Bookmark:
				js, ok := ev.Object.(*jobset.JobSet)
				if !ok {
					continue
				}
				rv = js.ResourceVersion
				if ev.Type != watch.Bookmark && js.Name == a.cfg.JobSet {
					a.observe(ctx, js)
				}
			}
		}
	}
}

func (a *Agent) finish(code int) {
	a.once.Do(func() { a.done <- code })
}

// podRestarted reports whether the pod already carries an attempt, that is
// whether this start is a container restart. When the pod cannot be read
// (a Role from before the agent read its pod), the start counts as a
// restart: that costs an in-place restart of every pod but never leaves one
// waiting for an attempt nobody else reaches.
func (a *Agent) podRestarted(ctx context.Context) bool {
	p, err := a.kube.CoreV1().Pods(a.cfg.Namespace).Get(ctx, a.cfg.PodName, metav1.GetOptions{})
	if err != nil {
		a.cfg.Logf("reading pod %s/%s: %v; treating this start as a container restart", a.cfg.Namespace, a.cfg.PodName, err)
		return true
	}
	_, ok := p.Annotations[jobset.InPlaceRestartAttemptKey]
	return ok
}

// StartAttempt is the attempt an agent enters at its start, from the
// JobSet's status and whether its container restarted (see the package
// comment).
func StartAttempt(prev, cur *int32, restarted bool) int32 {
	if restarted {
		if cur == nil {
			return 0
		}
		return *cur + 1
	}
	next := ptr.Deref(cur, 0)
	if prev != nil && *prev >= next {
		next = *prev + 1
	}
	return next
}

// inPlace reports whether js restarts in place.
func inPlace(js *jobset.JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == jobset.InPlaceRestart
}

// barrierDisabled reports whether js asks for no barrier.
func barrierDisabled(js *jobset.JobSet) bool {
	_, ok := js.Annotations[jobset.DisableInPlaceRestartKey]
	return ok
}

// observe acts on one state of the JobSet.
func (a *Agent) observe(ctx context.Context, js *jobset.JobSet) {
	if !inPlace(js) {
		a.lift(ctx, "in-place restart is not in use")
		return
	}
	a.mu.Lock()
	a.latest = js
	a.mu.Unlock()
	prev, cur := js.Status.PreviousInPlaceRestartAttempt, js.Status.CurrentInPlaceRestartAttempt
	if a.Attempt() == nil {
		select {
		case <-a.podRead:
		case <-ctx.Done():
			return
		}
		next := StartAttempt(prev, cur, a.restarted)
		err := a.report(ctx, next)
		if err != nil && barrierDisabled(js) {
			// The report is for the controller's bookkeeping only.
			a.cfg.Logf("reporting attempt %d: %v", next, err)
			a.lift(ctx, "the JobSet disables the in-place restart barrier")
			return
		}
		if err != nil {
			// The next event (or resync of the watch) tries again; a pod
			// that cannot report keeps the barrier down.
			a.cfg.Logf("reporting attempt %d: %v", next, err)
			a.mu.Lock()
			start := !a.retrying
			a.retrying = true
			a.mu.Unlock()
			if start {
				go a.retryReport(ctx, next)
			}
			return
		}
	}
	if barrierDisabled(js) {
		a.lift(ctx, "the JobSet disables the in-place restart barrier")
		return
	}
	att := *a.Attempt()
	if prev != nil && att <= *prev {
		a.cfg.Logf("attempt %d is over (previous %d): restarting in place with exit code %d", att, *prev, a.cfg.RestartExitCode)
		a.finish(a.cfg.RestartExitCode)
		return
	}
	if cur != nil && att == *cur {
		a.lift(ctx, fmt.Sprintf("every pod reached attempt %d", att))
	}
}

// retryReport keeps trying to report the attempt after a failed write, then
// acts on the newest JobSet seen.
func (a *Agent) retryReport(ctx context.Context, attempt int32) {
	delay := 100 * time.Millisecond
	for a.Attempt() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if err := a.report(ctx, attempt); err != nil {
			a.cfg.Logf("reporting attempt %d: %v", attempt, err)
			delay = min(2*delay, 5*time.Second)
		}
	}
	a.mu.Lock()
	js := a.latest
	a.mu.Unlock()
	a.observe(ctx, js)
}

// report writes the pod's attempt on the pod.
func (a *Agent) report(ctx context.Context, attempt int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attempt != nil {
		return nil
	}
	patch, err := AttemptPatch(attempt)
	if err != nil {
		return err
	}
	if _, err := a.kube.CoreV1().Pods(a.cfg.Namespace).Patch(ctx, a.cfg.PodName, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return err
	}
	a.attempt = &attempt
	a.cfg.Logf("pod %s/%s entered in-place restart attempt %d", a.cfg.Namespace, a.cfg.PodName, attempt)
	return nil
}

// AttemptPatch is the merge patch that sets the pod's attempt annotation.
func AttemptPatch(attempt int32) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		jobset.InPlaceRestartAttemptKey: strconv.Itoa(int(attempt)),
	}}})
}

// lift lifts the barrier once.
func (a *Agent) lift(ctx context.Context, why string) {
	a.mu.Lock()
	if a.lifted {
		a.mu.Unlock()
		return
	}
	a.lifted = true
	a.mu.Unlock()
	a.cfg.Logf("barrier lifted: %s", why)
	if a.cfg.WorkerCommand == "" {
		if a.cfg.LiftBarrier != nil {
			a.cfg.LiftBarrier()
		}
		return
	}
	go func() { a.finish(a.runWorker(ctx)) }()
}

// WorkerShell picks the shell for the worker command as upstream's agent
// does: $SHELL when set, else bash on PATH; where neither exists (a
// minimal image) it falls back to /bin/sh, and fails only without that.
func WorkerShell(getenv func(string) string, lookPath func(string) (string, error)) (string, error) {
	if s := getenv("SHELL"); s != "" {
		return s, nil
	}
	if p, err := lookPath("bash"); err == nil {
		return p, nil
	}
	if p, err := lookPath("/bin/sh"); err == nil {
		return p, nil
	}
	return "", errors.New("wrapper mode needs a shell to run WORKER_COMMAND: set SHELL, or add bash or /bin/sh to the image")
}

// runWorker runs the worker command and returns the code to end with.
func (a *Agent) runWorker(ctx context.Context) int {
	shell := a.cfg.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	cmd := exec.CommandContext(ctx, shell, "-c", a.cfg.WorkerCommand)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		a.cfg.Logf("worker succeeded")
		return 0
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		a.cfg.Logf("worker failed with exit code %d", exitErr.ExitCode())
		return exitErr.ExitCode()
	default:
		a.cfg.Logf("worker failed: %v", err)
		return 1
	}
}
