package embeddedetcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
)

// Filling the database past the quota raises NOSPACE: writes are refused,
// and the metric and the alarm hook say so. Once the data is
// deleted and compacted, a maintenance pass defragments the file, disarms
// the alarm, and writes work again.
func TestNospaceAlarmClearsWhenSpaceIsFreed(t *testing.T) {
	const quota = 32 * 1024 * 1024
	var changes []bool
	s, err := Start(Config{Dir: t.TempDir(), QuotaBackendBytes: quota, MaintenanceInterval: time.Hour,
		OnAlarmChange: func(raised bool, msg string) {
			changes = append(changes, raised)
			if !strings.Contains(msg, "NOSPACE") {
				t.Errorf("alarm message %q does not name NOSPACE", msg)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	value := strings.Repeat("v", 1024*1024)
	full := false
	for i := 0; i < 3*quota/len(value) && !full; i++ {
		_, err := c.Put(ctx, fmt.Sprintf("/registry/fill/%d", i), value)
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			full = true
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if !full {
		t.Fatalf("three times the quota was written without a NOSPACE error")
	}
	// etcd refuses the write at once but raises the alarm through raft
	// after it: wait until the alarm is recorded.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := c.AlarmList(ctx)
		return err == nil && len(resp.Alarms) > 0, nil
	})
	if err != nil {
		t.Fatalf("the NOSPACE alarm was never recorded: %v", err)
	}
	s.CheckSpace()
	if !s.NospaceRaised() {
		t.Errorf("NospaceRaised with the alarm raised: false")
	}
	if fmt.Sprint(changes) != "[true]" {
		t.Errorf("alarm hook calls %v, want [true]", changes)
	}
	if v, _ := testutil.GetGaugeMetricValue(nospaceAlarm); v != 1 {
		t.Errorf("nospace alarm metric = %v, want 1", v)
	}
	if v, _ := testutil.GetGaugeMetricValue(dbSizeBytes); v < quota/2 {
		t.Errorf("db size metric = %v, want close to the quota %d", v, quota)
	}

	resp, err := c.Delete(ctx, "/registry/fill/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("deleting under the alarm: %v", err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compacting: %v", err)
	}
	waitMostlyFree(t, s)
	sizeBefore := s.etcd.Server.Backend().Size()
	s.CheckSpace()
	if s.NospaceRaised() {
		t.Errorf("NospaceRaised after freeing space: true")
	}
	if fmt.Sprint(changes) != "[true false]" {
		t.Errorf("alarm hook calls %v, want [true false]", changes)
	}
	if v, _ := testutil.GetGaugeMetricValue(nospaceAlarm); v != 0 {
		t.Errorf("nospace alarm metric after freeing space = %v, want 0", v)
	}
	if after := s.etcd.Server.Backend().Size(); after >= sizeBefore {
		t.Errorf("database file %d bytes after maintenance, %d before: not defragmented", after, sizeBefore)
	}
	if _, err := c.Put(ctx, "/registry/after", "ok"); err != nil {
		t.Errorf("put after the alarm cleared: %v", err)
	}
}

// A database that is mostly free space is defragmented even without an
// alarm; one that is mostly data is left alone.
func TestDefragmentsWhenMostlyFree(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir(), MaintenanceInterval: time.Hour, MinDefragBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fill(ctx, t, c, "/registry/k/")
	n0 := successfulDefrags()
	s.CheckSpace()
	if successfulDefrags() != n0 {
		t.Errorf("a database full of live data was defragmented")
	}
	free(ctx, t, c, "/registry/k/")
	waitMostlyFree(t, s)
	before := s.etcd.Server.Backend().Size()
	s.CheckSpace()
	if successfulDefrags() != n0+1 {
		t.Errorf("a mostly free database was not defragmented")
	}
	if after := s.etcd.Server.Backend().Size(); after >= before {
		t.Errorf("size %d after defragmentation, %d before", after, before)
	}
	if v, _ := testutil.GetGaugeMetricValue(dbSizeBytes); int64(v) != s.etcd.Server.Backend().Size() {
		t.Errorf("db size metric %v, file %d", v, s.etcd.Server.Backend().Size())
	}
}

// A mostly free database is defragmented at most once per
// MinDefragInterval: whoever may create and delete JobSets cannot stall
// the member with a defragmentation whenever they like.
func TestDefragmentationIsRateLimited(t *testing.T) {
	if n := defragsOfSecondFreeing(t, time.Nanosecond); n != 1 {
		t.Fatalf("with no effective interval the second freeing made %v defragmentations, want 1", n)
	}
	if n := defragsOfSecondFreeing(t, time.Hour); n != 0 {
		t.Errorf("within MinDefragInterval the second freeing made %v defragmentations, want 0", n)
	}
}

// defragsOfSecondFreeing frees most of a database twice, with a
// maintenance pass after each, and returns how many defragmentations the
// second pass made. The first pass (or the one at start) defragments.
func defragsOfSecondFreeing(t *testing.T, interval time.Duration) float64 {
	t.Helper()
	s, err := Start(Config{Dir: t.TempDir(), MaintenanceInterval: time.Hour, MinDefragBytes: 1, MinDefragInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := client(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fillAndFree := func(prefix string) {
		t.Helper()
		fill(ctx, t, c, prefix)
		free(ctx, t, c, prefix)
	}
	fillAndFree("/registry/a/")
	waitMostlyFree(t, s)
	s.CheckSpace()
	if s.maintenance.lastDefrag.IsZero() {
		t.Fatalf("a mostly free database was never defragmented")
	}
	fillAndFree("/registry/b/")
	waitMostlyFree(t, s)
	n := successfulDefrags()
	s.CheckSpace()
	return successfulDefrags() - n
}

func successfulDefrags() float64 {
	v, _ := testutil.GetCounterMetricValue(defragsTotal.WithLabelValues("success"))
	return v
}

// fill writes 8 MiB under prefix.
func fill(ctx context.Context, t *testing.T, c *clientv3.Client, prefix string) {
	t.Helper()
	value := strings.Repeat("v", 512*1024)
	for i := 0; i < 16; i++ {
		if _, err := c.Put(ctx, fmt.Sprintf("%s%d", prefix, i), value); err != nil {
			t.Fatal(err)
		}
	}
}

// free deletes everything under prefix and compacts its history away.
func free(ctx context.Context, t *testing.T, c *clientv3.Client, prefix string) {
	t.Helper()
	resp, err := c.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// waitMostlyFree returns once at least half of the database file is free.
// Pages that a compaction frees count as free only once no read
// transaction holds them any more: only after later commits, which an
// idle member does not make, so the poll commits.
func waitMostlyFree(t *testing.T, s *Server) {
	t.Helper()
	be := s.etcd.Server.Backend()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		be.ForceCommit()
		size := be.Size()
		return float64(size-be.SizeInUse()) >= defragFreeRatio*float64(size), nil
	})
	if err != nil {
		t.Fatalf("the database did not become mostly free: size %d, in use %d", be.Size(), be.SizeInUse())
	}
}
