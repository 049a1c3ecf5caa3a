package controller

import (
	"strconv"
	"time"

	jobsetapi "github.com/nativejobset/jobset/pkg/apis/jobset"
)

// availabilityTimeLayout is RFC 3339 with milliseconds, in UTC.
const availabilityTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// availabilityKeys are every annotation the state is stored in.
var availabilityKeys = []string{
	jobsetapi.AvailableSinceAnnotation,
	jobsetapi.AvailableGenerationAnnotation,
	jobsetapi.UptimeSecondsAnnotation,
	jobsetapi.InterruptedSinceAnnotation,
	jobsetapi.InterruptedSecondsAnnotation,
	jobsetapi.InterruptionsAnnotation,
	jobsetapi.UptimeAtLastRecoveryAnnotation,
}

// availabilityFromAnnotations reads the state. A value that does not parse
// (edited by hand) counts as absent rather than failing the sync.
func availabilityFromAnnotations(a map[string]string) availabilityState {
	return availabilityFrom(func(key string) string { return a[key] })
}

// availabilityFrom reads the state through annotation, which returns the
// value of an annotation ("" when absent).
func availabilityFrom(annotation func(key string) string) availabilityState {
	var s availabilityState
	s.AvailableSince = parseAvailabilityTime(annotation(jobsetapi.AvailableSinceAnnotation))
	if s.AvailableSince != nil {
		if g, err := strconv.ParseInt(annotation(jobsetapi.AvailableGenerationAnnotation), 10, 64); err == nil {
			s.AvailableGeneration = g
		}
	}
	if d := parseSeconds(annotation(jobsetapi.UptimeSecondsAnnotation)); d != nil {
		s.Uptime = *d
	}
	s.Downtime = parseSeconds(annotation(jobsetapi.InterruptedSecondsAnnotation))
	if s.Downtime != nil {
		s.InterruptedSince = parseAvailabilityTime(annotation(jobsetapi.InterruptedSinceAnnotation))
	}
	if n, err := strconv.ParseInt(annotation(jobsetapi.InterruptionsAnnotation), 10, 64); err == nil && n > 0 {
		s.Interruptions = n
	}
	s.UptimeAtLastRecovery = parseSeconds(annotation(jobsetapi.UptimeAtLastRecoveryAnnotation))
	return s
}

// annotations encodes the state; absent fields have no key.
func (s *availabilityState) annotations() map[string]string {
	out := map[string]string{}
	if s.AvailableSince != nil {
		out[jobsetapi.AvailableSinceAnnotation] = formatAvailabilityTime(*s.AvailableSince)
		out[jobsetapi.AvailableGenerationAnnotation] = strconv.FormatInt(s.AvailableGeneration, 10)
	}
	if s.Uptime > 0 || s.AvailableSince != nil || s.UptimeAtLastRecovery != nil {
		out[jobsetapi.UptimeSecondsAnnotation] = formatSeconds(s.Uptime)
	}
	if s.Downtime != nil {
		out[jobsetapi.InterruptedSecondsAnnotation] = formatSeconds(*s.Downtime)
		if s.InterruptedSince != nil {
			out[jobsetapi.InterruptedSinceAnnotation] = formatAvailabilityTime(*s.InterruptedSince)
		}
	}
	if s.Interruptions > 0 {
		out[jobsetapi.InterruptionsAnnotation] = strconv.FormatInt(s.Interruptions, 10)
	}
	if s.UptimeAtLastRecovery != nil {
		out[jobsetapi.UptimeAtLastRecoveryAnnotation] = formatSeconds(*s.UptimeAtLastRecovery)
	}
	return out
}

// availabilityPatch returns the annotation changes from current to want
// for a JSON merge patch (nil deletes a key); empty when nothing changes.
func availabilityPatch(current map[string]string, want map[string]string) map[string]any {
	out := map[string]any{}
	for _, k := range availabilityKeys {
		cur, had := current[k]
		w, wanted := want[k]
		switch {
		case wanted && (!had || cur != w):
			out[k] = w
		case !wanted && had:
			out[k] = nil
		}
	}
	return out
}

// UptimeSeconds is a JobSet's total available time at now, read from its
// annotations through annotation (the value of a key, "" when absent; a
// cached JobSet's is read without building a map), for the uptime gauge,
// computed at scrape time.
func UptimeSeconds(annotation func(key string) string, now time.Time) float64 {
	s := availabilityFrom(annotation)
	return s.uptimeAt(now).Seconds()
}

// InterruptionSeconds is the downtime so far of a JobSet's current
// interruption at now (0 when it is not interrupted), read from its
// annotations (read as UptimeSeconds reads them).
func InterruptionSeconds(annotation func(key string) string, now time.Time) float64 {
	s := availabilityFrom(annotation)
	return s.downtimeAt(now).Seconds()
}

func formatAvailabilityTime(t time.Time) string {
	return t.UTC().Format(availabilityTimeLayout)
}

func parseAvailabilityTime(v string) *time.Time {
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil
	}
	return &t
}

func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

func parseSeconds(v string) *time.Duration {
	if v == "" {
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1e12 {
		return nil
	}
	d := time.Duration(f * float64(time.Second))
	return &d
}
