package controller

import "time"

// The availability state machine behind the interruption metrics. It is a
// pure function of the previous state (kept in the JobSet's annotations,
// see availability_annotations.go), what one sync observed, and the time.
//
// Definitions (docs/reference/metrics.md states them for users):
//   - available: running, and every Job of the current attempt ready or
//     succeeded; a completed JobSet ends available.
//   - interruption: starts when an available JobSet stops being available
//     for any reason but a change of its own spec: a failure, a restart, a
//     pod lost or no longer ready. A failure signal (disrupted) makes it
//     one even when the spec changed too. It ends when
//     the JobSet is available (or completes) again. Failure restarts
//     during an interruption extend it. A JobSet that fails ends its
//     interruption without a recovery sample.
//   - suspension pauses every clock: an available period ends (resuming
//     starts from scratch, like a new JobSet, and is not an interruption),
//     an interruption's downtime clock stops and restarts at the resume.
//   - leaving availability because the spec changed (metadata.generation
//     moved, e.g. an elastic scale-up whose new Jobs are not ready yet)
//     without a failure signal ends the available period without starting
//     an interruption.

// availabilityPhase is the lifecycle phase a sync observed.
type availabilityPhase int

const (
	phaseRunning availabilityPhase = iota
	phaseSuspended
	phaseCompleted
	phaseFailed
)

// availabilityState is one JobSet's bookkeeping.
type availabilityState struct {
	// AvailableSince is set while available.
	AvailableSince *time.Time
	// AvailableGeneration is the generation last seen available.
	AvailableGeneration int64
	// Uptime is the available time before AvailableSince.
	Uptime time.Duration
	// Downtime is set during an interruption: the downtime accumulated
	// before InterruptedSince.
	Downtime *time.Duration
	// InterruptedSince is set while an interruption's clock runs (not
	// while suspended).
	InterruptedSince *time.Time
	// Interruptions counts the interruptions that started.
	Interruptions int64
	// UptimeAtLastRecovery is the total uptime when the last interruption
	// ended.
	UptimeAtLastRecovery *time.Duration
}

// availabilityObservation is what one sync saw.
type availabilityObservation struct {
	Phase availabilityPhase
	// Available: every Job of the current attempt is ready or succeeded.
	Available bool
	// Disrupted: a failure or a restart is under way (a restart in
	// progress, a failed Job, or a Job whose pods failed and is not ready).
	Disrupted bool
	// Generation is the JobSet's metadata.generation.
	Generation int64
}

// availabilitySamples are the histogram observations a transition yields.
type availabilitySamples struct {
	TimeToRecover            *time.Duration
	TimeBetweenInterruptions *time.Duration
}

func (s availabilitySamples) empty() bool {
	return s.TimeToRecover == nil && s.TimeBetweenInterruptions == nil
}

// interrupted reports whether an interruption is under way (running or
// paused by a suspension).
func (s *availabilityState) interrupted() bool { return s.Downtime != nil }

// uptimeAt is the total available time at now.
func (s *availabilityState) uptimeAt(now time.Time) time.Duration {
	if s.AvailableSince == nil {
		return s.Uptime
	}
	return s.Uptime + since(*s.AvailableSince, now)
}

// downtimeAt is the current interruption's downtime at now.
func (s *availabilityState) downtimeAt(now time.Time) time.Duration {
	if s.Downtime == nil {
		return 0
	}
	if s.InterruptedSince == nil {
		return *s.Downtime
	}
	return *s.Downtime + since(*s.InterruptedSince, now)
}

// since is now-t, never negative (clocks of different controller
// instances may disagree slightly).
func since(t, now time.Time) time.Duration {
	if d := now.Sub(t); d > 0 {
		return d
	}
	return 0
}

func durationPtr(d time.Duration) *time.Duration { return &d }
func timePtr(t time.Time) *time.Time             { return &t }

// nextAvailability applies one observation to the previous state. It
// returns the new state and the samples the transition yields; the caller
// persists the state and only then observes the samples, so each sample is
// observed at most once even across controller restarts.
func nextAvailability(prev availabilityState, obs availabilityObservation, now time.Time) (availabilityState, availabilitySamples) {
	s := prev
	var out availabilitySamples

	endAvailable := func() {
		if s.AvailableSince != nil {
			s.Uptime += since(*s.AvailableSince, now)
			s.AvailableSince, s.AvailableGeneration = nil, 0
		}
	}
	pauseInterruption := func() {
		if s.InterruptedSince != nil {
			*s.Downtime += since(*s.InterruptedSince, now)
			s.InterruptedSince = nil
		}
	}
	recoverInterruption := func() {
		pauseInterruption()
		out.TimeToRecover = durationPtr(*s.Downtime)
		s.Downtime = nil
		s.UptimeAtLastRecovery = durationPtr(s.uptimeAt(now))
	}
	// Copy the pointed-to values: prev must stay unchanged.
	if s.Downtime != nil {
		s.Downtime = durationPtr(*s.Downtime)
	}

	switch obs.Phase {
	case phaseCompleted:
		if s.interrupted() {
			recoverInterruption()
		}
		endAvailable()
	case phaseFailed:
		endAvailable()
		s.Downtime, s.InterruptedSince = nil, nil
	case phaseSuspended:
		endAvailable()
		if s.interrupted() {
			pauseInterruption()
		}
	case phaseRunning:
		switch {
		case obs.Available && s.AvailableSince == nil:
			if s.interrupted() {
				recoverInterruption()
			}
			s.AvailableSince, s.AvailableGeneration = timePtr(now), obs.Generation
		case obs.Available && s.AvailableGeneration != obs.Generation:
			// Still available after a spec change.
			s.AvailableGeneration = obs.Generation
		case !obs.Available && s.AvailableSince != nil:
			specChanged := obs.Generation != s.AvailableGeneration
			endAvailable()
			if obs.Disrupted || !specChanged {
				s.Interruptions++
				s.Downtime, s.InterruptedSince = durationPtr(0), timePtr(now)
				if s.UptimeAtLastRecovery != nil {
					out.TimeBetweenInterruptions = durationPtr(max(s.Uptime-*s.UptimeAtLastRecovery, 0))
				}
			}
		case !obs.Available && s.interrupted() && s.InterruptedSince == nil:
			// Resumed during an interruption: its clock runs again.
			s.InterruptedSince = timePtr(now)
		}
	}
	return s, out
}
