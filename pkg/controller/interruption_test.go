package controller

import (
	"reflect"
	"testing"
	"time"
)

// availabilityRun drives the state machine through observations, each
// at t0 plus its offset, and collects the samples.
type availabilityRun struct {
	t       *testing.T
	state   availabilityState
	recover []time.Duration
	between []time.Duration
}

func (r *availabilityRun) at(offset time.Duration, obs availabilityObservation) {
	r.t.Helper()
	before := r.state
	next, samples := nextAvailability(r.state, obs, t0.Add(offset))
	if !reflect.DeepEqual(before, r.state) {
		r.t.Fatal("nextAvailability changed its input")
	}
	// Every transition survives the round trip through annotations, as
	// it does across a controller restart.
	r.state = availabilityFromAnnotations(next.annotations())
	if !samples.empty() && reflect.DeepEqual(before.annotations(), next.annotations()) {
		r.t.Fatalf("samples %+v without a state change", samples)
	}
	if d := samples.TimeToRecover; d != nil {
		r.recover = append(r.recover, *d)
	}
	if d := samples.TimeBetweenInterruptions; d != nil {
		r.between = append(r.between, *d)
	}
}

func (r *availabilityRun) wantUptime(offset, want time.Duration) {
	r.t.Helper()
	if got := r.state.uptimeAt(t0.Add(offset)); got != want {
		r.t.Fatalf("uptime at +%v = %v, want %v", offset, got, want)
	}
}

var (
	obsStarting  = availabilityObservation{Phase: phaseRunning}
	obsAvailable = availabilityObservation{Phase: phaseRunning, Available: true}
	obsDisrupted = availabilityObservation{Phase: phaseRunning, Disrupted: true}
	obsScaledUp  = availabilityObservation{Phase: phaseRunning, Generation: 2} // new Jobs not ready yet
	obsSuspended = availabilityObservation{Phase: phaseSuspended}
	obsCompleted = availabilityObservation{Phase: phaseCompleted, Available: true}
	obsFailed    = availabilityObservation{Phase: phaseFailed, Disrupted: true}
)

func durations(ds ...time.Duration) []time.Duration { return ds }

func TestAvailabilityRecoveredInterruptions(t *testing.T) {
	r := &availabilityRun{t: t}
	r.at(0, obsStarting)
	r.at(10*time.Second, obsAvailable)
	r.wantUptime(70*time.Second, time.Minute)
	r.at(70*time.Second, obsAvailable) // no change
	r.at(100*time.Second, obsDisrupted)
	r.wantUptime(200*time.Second, 90*time.Second) // uptime stops during the interruption
	r.at(130*time.Second, obsAvailable)           // recovered after 30s
	r.at(230*time.Second, obsDisrupted)           // 100s after the recovery
	r.at(240*time.Second, obsAvailable)           // recovered after 10s

	if !reflect.DeepEqual(r.recover, durations(30*time.Second, 10*time.Second)) {
		t.Errorf("time to recover = %v", r.recover)
	}
	// No sample for the first interruption, 100s of uptime before the
	// second.
	if !reflect.DeepEqual(r.between, durations(100*time.Second)) {
		t.Errorf("time between interruptions = %v", r.between)
	}
	if r.state.Interruptions != 2 {
		t.Errorf("interruptions = %d", r.state.Interruptions)
	}
	r.wantUptime(250*time.Second, 90*time.Second+100*time.Second+10*time.Second)
}

func TestAvailabilityRestartsDuringRecovery(t *testing.T) {
	r := &availabilityRun{t: t}
	r.at(0, obsAvailable)
	r.at(60*time.Second, obsDisrupted)
	r.at(70*time.Second, obsStarting)  // new attempt's Jobs not ready yet
	r.at(80*time.Second, obsDisrupted) // a second failure restart
	r.at(90*time.Second, obsDisrupted)
	r.at(120*time.Second, obsAvailable)
	if !reflect.DeepEqual(r.recover, durations(60*time.Second)) || r.state.Interruptions != 1 || len(r.between) != 0 {
		t.Fatalf("recover %v, between %v, interruptions %d: want one interruption of 60s", r.recover, r.between, r.state.Interruptions)
	}
}

func TestAvailabilitySuspendExcludedFromDowntime(t *testing.T) {
	t.Run("suspended while interrupted", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(100*time.Second, obsDisrupted)
		r.at(110*time.Second, obsSuspended) // 10s of downtime so far
		r.at(500*time.Second, obsSuspended)
		r.at(1000*time.Second, obsStarting) // resumed: the clock runs again
		r.at(1005*time.Second, obsAvailable)
		if !reflect.DeepEqual(r.recover, durations(15*time.Second)) {
			t.Fatalf("time to recover = %v, want 15s", r.recover)
		}
		r.wantUptime(1005*time.Second, 100*time.Second)
	})
	t.Run("suspended while available", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(50*time.Second, obsSuspended)
		r.wantUptime(400*time.Second, 50*time.Second)
		r.at(400*time.Second, obsStarting) // resume: starting, not interrupted
		r.at(420*time.Second, obsDisrupted)
		r.at(430*time.Second, obsAvailable)
		if len(r.recover) != 0 || r.state.Interruptions != 0 {
			t.Fatalf("a suspension counted as an interruption: recover %v, interruptions %d", r.recover, r.state.Interruptions)
		}
		r.wantUptime(440*time.Second, 60*time.Second)
	})
}

func TestAvailabilityOtherTransitions(t *testing.T) {
	t.Run("not ready after a spec change", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(10*time.Second, obsScaledUp)
		r.at(20*time.Second, availabilityObservation{Phase: phaseRunning, Available: true, Generation: 2})
		if len(r.recover) != 0 || r.state.Interruptions != 0 {
			t.Fatalf("recover %v, interruptions %d", r.recover, r.state.Interruptions)
		}
		r.wantUptime(30*time.Second, 20*time.Second)
		// Still available after another spec change: the generation is
		// followed, so a later loss of readiness is an interruption.
		r.at(30*time.Second, availabilityObservation{Phase: phaseRunning, Available: true, Generation: 3})
		r.at(40*time.Second, availabilityObservation{Phase: phaseRunning, Generation: 3})
		r.at(45*time.Second, availabilityObservation{Phase: phaseRunning, Available: true, Generation: 3})
		if !reflect.DeepEqual(r.recover, durations(5*time.Second)) {
			t.Fatalf("time to recover = %v, want 5s", r.recover)
		}
	})
	t.Run("readiness lost without a failure signal", func(t *testing.T) {
		// A node gone silent: pods no longer ready, nothing failed yet.
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(10*time.Second, obsStarting)
		r.at(25*time.Second, obsAvailable)
		if !reflect.DeepEqual(r.recover, durations(15*time.Second)) {
			t.Fatalf("time to recover = %v, want 15s", r.recover)
		}
	})
	t.Run("a failure during a scale-up", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(10*time.Second, availabilityObservation{Phase: phaseRunning, Generation: 2, Disrupted: true})
		if r.state.Interruptions != 1 {
			t.Fatalf("interruptions = %d, want 1", r.state.Interruptions)
		}
	})
	t.Run("completed", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(10*time.Second, obsDisrupted)
		r.at(15*time.Second, obsCompleted) // complete counts as recovered
		if !reflect.DeepEqual(r.recover, durations(5*time.Second)) {
			t.Fatalf("time to recover = %v", r.recover)
		}
		r.wantUptime(time.Hour, 10*time.Second) // frozen
		r.at(time.Hour, obsCompleted)
		if len(r.recover) != 1 {
			t.Fatal("a finished JobSet recorded again")
		}
	})
	t.Run("failed", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsAvailable)
		r.at(10*time.Second, obsDisrupted)
		r.at(20*time.Second, obsFailed)
		if len(r.recover) != 0 || r.state.interrupted() {
			t.Fatalf("a failed JobSet recovered: %v", r.recover)
		}
		r.wantUptime(time.Hour, 10*time.Second)
	})
	t.Run("never available", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(0, obsStarting)
		r.at(10*time.Second, obsDisrupted) // a failure while starting is no interruption
		r.at(20*time.Second, obsAvailable)
		if len(r.recover) != 0 || r.state.Interruptions != 0 {
			t.Fatalf("recover %v, interruptions %d", r.recover, r.state.Interruptions)
		}
	})
	t.Run("clock behind the stored times", func(t *testing.T) {
		r := &availabilityRun{t: t}
		r.at(time.Minute, obsAvailable)
		r.at(0, obsDisrupted) // another instance's clock, a minute behind
		r.at(time.Second, obsAvailable)
		if !reflect.DeepEqual(r.recover, durations(time.Second)) || r.state.Uptime != 0 {
			t.Fatalf("recover %v, uptime %v", r.recover, r.state.Uptime)
		}
	})
}

func TestAvailabilityAnnotations(t *testing.T) {
	s := availabilityState{
		AvailableSince:       timePtr(t0.Add(1500 * time.Millisecond)),
		Uptime:               90 * time.Second,
		Interruptions:        2,
		UptimeAtLastRecovery: durationPtr(80 * time.Second),
	}
	a := s.annotations()
	want := map[string]string{
		"jobset.sigs.k8s.io/available-since":                 "2026-01-02T03:04:06.500Z",
		"jobset.sigs.k8s.io/available-generation":            "0",
		"jobset.sigs.k8s.io/uptime-seconds":                  "90.000",
		"jobset.sigs.k8s.io/interruptions":                   "2",
		"jobset.sigs.k8s.io/uptime-at-last-recovery-seconds": "80.000",
	}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("annotations = %v", a)
	}
	if got := availabilityFromAnnotations(a); !reflect.DeepEqual(got.annotations(), a) {
		t.Fatalf("round trip = %+v", got)
	}
	if got := UptimeSeconds(mapReader(a), t0.Add(11500*time.Millisecond)); got != 100 {
		t.Fatalf("UptimeSeconds = %v, want 100", got)
	}
	if got := InterruptionSeconds(mapReader(a), t0); got != 0 {
		t.Fatalf("InterruptionSeconds while available = %v", got)
	}
	interrupted := availabilityState{Downtime: durationPtr(5 * time.Second), InterruptedSince: timePtr(t0)}
	if got := InterruptionSeconds(mapReader(interrupted.annotations()), t0.Add(10*time.Second)); got != 15 {
		t.Fatalf("InterruptionSeconds = %v, want 15", got)
	}
	paused := availabilityState{Downtime: durationPtr(5 * time.Second)}
	if got := InterruptionSeconds(mapReader(paused.annotations()), t0.Add(10*time.Second)); got != 5 {
		t.Fatalf("InterruptionSeconds while suspended = %v, want 5", got)
	}

	// Values edited into nonsense count as absent.
	bad := availabilityFromAnnotations(map[string]string{
		"jobset.sigs.k8s.io/available-since": "yesterday",
		"jobset.sigs.k8s.io/uptime-seconds":  "-5",
		"jobset.sigs.k8s.io/interruptions":   "many",
	})
	if !reflect.DeepEqual(bad, availabilityState{}) {
		t.Fatalf("state from bad annotations = %+v", bad)
	}

	// The patch sets changed keys, deletes dropped ones and leaves
	// foreign annotations alone.
	cur := map[string]string{"user": "x", "jobset.sigs.k8s.io/interrupted-since": "2026-01-02T03:04:05.000Z", "jobset.sigs.k8s.io/interruptions": "2"}
	p := availabilityPatch(cur, map[string]string{"jobset.sigs.k8s.io/interruptions": "2", "jobset.sigs.k8s.io/uptime-seconds": "1.000"})
	wantPatch := map[string]any{"jobset.sigs.k8s.io/interrupted-since": nil, "jobset.sigs.k8s.io/uptime-seconds": "1.000"}
	if !reflect.DeepEqual(p, wantPatch) {
		t.Fatalf("patch = %v", p)
	}
}

// mapReader reads annotations from a map, as UptimeSeconds reads them.
func mapReader(a map[string]string) func(string) string {
	return func(key string) string { return a[key] }
}
