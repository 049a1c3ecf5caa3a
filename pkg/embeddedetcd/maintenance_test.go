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
	"k8s.io/component-base/metrics/testutil"
)

// Filling the database past the quota raises NOSPACE: writes are refused,
// the readiness check fails and the metric says so. Once the data is
// deleted and compacted, a maintenance pass defragments the file, disarms
// the alarm, and writes work again.
func TestNospaceAlarmClearsWhenSpaceIsFreed(t *testing.T) {
	const quota = 32 * 1024 * 1024
	s, err := Start(Config{Dir: t.TempDir(), QuotaBackendBytes: quota, MaintenanceInterval: time.Hour})
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
	s.CheckSpace()
	if err := s.SpaceCheck().Check(nil); err == nil || !strings.Contains(err.Error(), "NOSPACE") {
		t.Errorf("readiness check with the alarm raised: %v, want a NOSPACE error", err)
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
	sizeBefore := s.etcd.Server.Backend().Size()
	s.CheckSpace()
	if err := s.SpaceCheck().Check(nil); err != nil {
		t.Errorf("readiness check after freeing space: %v", err)
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
	value := strings.Repeat("v", 512*1024)
	for i := 0; i < 16; i++ {
		if _, err := c.Put(ctx, fmt.Sprintf("/registry/k/%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	defrags := func() float64 {
		v, _ := testutil.GetCounterMetricValue(defragsTotal.WithLabelValues("success"))
		return v
	}
	n0 := defrags()
	s.CheckSpace()
	if defrags() != n0 {
		t.Errorf("a database full of live data was defragmented")
	}
	resp, err := c.Delete(ctx, "/registry/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	before := s.etcd.Server.Backend().Size()
	s.CheckSpace()
	if defrags() != n0+1 {
		t.Errorf("a mostly free database was not defragmented")
	}
	if after := s.etcd.Server.Backend().Size(); after >= before {
		t.Errorf("size %d after defragmentation, %d before", after, before)
	}
	if v, _ := testutil.GetGaugeMetricValue(dbSizeBytes); int64(v) != s.etcd.Server.Backend().Size() {
		t.Errorf("db size metric %v, file %d", v, s.etcd.Server.Backend().Size())
	}
}
