package faults

import (
	"testing"
	"time"
)

// BenchmarkLeaderTakeover: per op, SIGKILL the jobset-controller that
// holds the leader Lease and measure the time until the standby holds it
// (seen by polling the Lease every 250 ms); the killed one is started
// again as a standby before the next op. The Lease must expire first, so
// leaseDuration is the floor: takeover/lease is the ratio to it. The tests
// (TestControllerLeaderKilled*) only assert that the standby takes over.
//
//	go test ./test/faults -run '^$' -bench LeaderTakeover -benchtime 5x
func BenchmarkLeaderTakeover(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		old, oldID, _ := liveLeader(b, "", time.Minute)
		if err := old.Kill(); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		_, _, seen := liveLeader(b, oldID, takeoverWait)
		total += seen.Sub(killed)
		revive(b, "killed by "+b.Name())
	}
	mean := total.Seconds() / float64(b.N)
	b.ReportMetric(mean, "takeover-s")
	b.ReportMetric(mean/leaseDuration.Seconds(), "takeover/lease")
}
