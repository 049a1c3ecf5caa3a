package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/test/invariants"
)

// retryable reports whether a client may simply try the request again:
// the server was unavailable, overloaded or timed out, or the connection
// broke. Such a write may or may not have happened.
func retryable(err error) bool {
	switch {
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// client-go's wrapping of a stream that kube-apiserver reset while the
	// answer was read (the proxied connection to a killed replica broke):
	// "... when reading response body ... Please retry."
	return strings.Contains(err.Error(), "when reading response body")
}

// outcomeUnknown reports whether a failed write may still have happened:
// a retryable error, a server error (etcd may have committed a write whose
// answer timed out), or a request given up by the client.
func outcomeUnknown(err error) bool {
	return retryable(err) || serverError(err) || errors.Is(err, context.Canceled)
}

// serverError reports whether err is an answer with a 5xx status.
func serverError(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code >= 500
}

// errorCode names an error for the tally: the HTTP status code and reason,
// or the kind of transport failure.
func errorCode(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		s := se.Status()
		reason := string(s.Reason)
		if reason == "" {
			reason = http.StatusText(int(s.Code))
		}
		return fmt.Sprintf("%d %s", s.Code, reason)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "client timeout"
	}
	if retryable(err) {
		return "transport"
	}
	return "other"
}

// stats counts the writes of a load.
type stats struct {
	mu        sync.Mutex
	acked     int
	errors    map[string]int
	unretried []string // errors that are not retryable, with the operation
	latencies []time.Duration
	ackTimes  []time.Time
	// mayRetry, when set, replaces retryable as the test for errors a
	// client may retry.
	mayRetry func(error) bool
	examples map[string]string // the first error of each code
}

func (s *stats) ackCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// ackedBetween reports whether a write was acknowledged after from and not
// after until.
func (s *stats) ackedBetween(from, until time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, at := range s.ackTimes {
		if at.After(from) && !at.After(until) {
			return true
		}
	}
	return false
}

func newStats() *stats { return &stats{errors: map[string]int{}, examples: map[string]string{}} }

func (s *stats) record(op string, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		return // the load was stopped
	}
	if err == nil {
		s.acked++
		s.latencies = append(s.latencies, d)
		s.ackTimes = append(s.ackTimes, time.Now())
		return
	}
	code := errorCode(err)
	s.errors[code]++
	if _, ok := s.examples[code]; !ok {
		s.examples[code] = fmt.Sprintf("%s: %v", op, err)
	}
	mayRetry := retryable
	if s.mayRetry != nil {
		mayRetry = s.mayRetry
	}
	if !mayRetry(err) {
		s.unretried = append(s.unretried, fmt.Sprintf("%s: %v", op, err))
	}
}

// p99 is the 99th percentile latency of the acknowledged writes.
func (s *stats) p99() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.latencies) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[(len(l)*99)/100]
}

// record is what the acknowledged writes say about one JobSet.
type record struct {
	uid     types.UID
	exists  invariants.Field // "true" / "false"
	label   invariants.Field // the label written by merge patches
	ssa     invariants.Field // the annotation written by server-side apply
	par     invariants.Field // parallelism written through /scale
	suspend invariants.Field // "true" / "false"
	resumes int32            // resume writes sent, whatever their outcome
}

// ledger holds a record per JobSet name. Each name is written by one
// client goroutine at a time, so "the last acknowledged write" is well
// defined.
type ledger struct {
	mu   sync.Mutex
	recs map[string]*record
}

func newLedger() *ledger { return &ledger{recs: map[string]*record{}} }

func (l *ledger) get(name string) *record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[name]
	if r == nil {
		r = &record{exists: invariants.Field{Want: "false"}}
		l.recs[name] = r
	}
	return r
}

// update applies a change to a record under the ledger's lock.
func (l *ledger) update(name string, f func(r *record)) {
	r := l.get(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	f(r)
}

// lost compares the JobSets of the namespace with the ledger and returns
// every acknowledged write that is not reflected.
func (l *ledger) lost(ctx context.Context, ns string) ([]string, error) {
	list, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	stored := map[string]*v1alpha2.JobSet{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			stored[list.Items[i].Name] = &list.Items[i]
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, r := range l.recs {
		js := stored[name]
		if !r.exists.Allows(strconv.FormatBool(js != nil)) {
			out = append(out, fmt.Sprintf("%s: exists=%v, the acknowledged writes say %s", name, js != nil, r.exists.Want))
			continue
		}
		if js == nil {
			continue
		}
		if r.uid != "" && js.UID != r.uid && !r.exists.Uncertain() {
			out = append(out, fmt.Sprintf("%s: UID %s, acknowledged create returned %s", name, js.UID, r.uid))
		}
		check := func(what string, f invariants.Field, got string) {
			if !f.Allows(got) {
				out = append(out, fmt.Sprintf("%s: %s is %q, the last acknowledged write set %q (unknown outcome: %v)", name, what, got, f.Want, f.Maybe()))
			}
		}
		check("label", r.label, js.Labels[seqLabel])
		check("applied annotation", r.ssa, js.Annotations[ssaAnnotation])
		if len(js.Spec.ReplicatedJobs) > 0 {
			check("parallelism", r.par, strconv.Itoa(int(ptr.Deref(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism, 1))))
		}
		check("suspend", r.suspend, strconv.FormatBool(ptr.Deref(js.Spec.Suspend, false)))
	}
	sort.Strings(out)
	return out, nil
}

const (
	seqLabel      = "faults.jobset.x-k8s.io/seq"
	ssaAnnotation = "faults.jobset.x-k8s.io/applied"
)

// created records the outcome of a create of a JobSet built by jobSet with
// `pods` pods per Job, not suspended.
func (l *ledger) created(js *v1alpha2.JobSet, got *v1alpha2.JobSet, err error) {
	acked := err == nil
	if !acked && !outcomeUnknown(err) {
		return // refused: nothing happened
	}
	l.update(js.Name, func(r *record) {
		if acked {
			r.uid = got.UID
		}
		r.exists.Set("true", acked)
		r.label.Set(js.Labels[seqLabel], acked)
		r.ssa.Set("", acked)
		r.par.Set(strconv.Itoa(int(ptr.Deref(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism, 1))), acked)
		r.suspend.Set(strconv.FormatBool(ptr.Deref(js.Spec.Suspend, false)), acked)
	})
}

// wrote records the outcome of a write of one field.
func (l *ledger) wrote(name string, pick func(r *record) *invariants.Field, value string, err error) {
	if err != nil && !outcomeUnknown(err) {
		return
	}
	l.update(name, func(r *record) { pick(r).Set(value, err == nil) })
}

func labelPatch(seq int) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"}}}`, seqLabel, seq))
}

// patchLabel writes the seq label with a merge patch.
func patchLabel(ctx context.Context, l *ledger, st *stats, ns, name string, seq int) error {
	start := time.Now()
	_, err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Patch(ctx, name, types.MergePatchType, labelPatch(seq), metav1.PatchOptions{})
	st.record("merge patch "+name, time.Since(start), err)
	l.wrote(name, func(r *record) *invariants.Field { return &r.label }, strconv.Itoa(seq), err)
	return err
}

// deleteJobSet deletes a JobSet.
func deleteJobSet(ctx context.Context, l *ledger, st *stats, ns, name string) error {
	start := time.Now()
	err := cl.JobSets.JobsetV1alpha2().JobSets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	st.record("delete "+name, time.Since(start), err)
	l.wrote(name, func(r *record) *invariants.Field { return &r.exists }, "false", err)
	return err
}

// createJobSet creates a JobSet.
func createJobSet(ctx context.Context, l *ledger, st *stats, js *v1alpha2.JobSet) error {
	start := time.Now()
	got, err := cl.JobSets.JobsetV1alpha2().JobSets(js.Namespace).Create(ctx, js, metav1.CreateOptions{})
	st.record("create "+js.Name, time.Since(start), err)
	l.created(js, got, err)
	return err
}
