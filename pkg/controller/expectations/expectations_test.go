package expectations

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestCheckForgetsOnceTheCacheShowsTheWrite(t *testing.T) {
	s := New[string](clocktesting.NewFakePassiveClock(t0), time.Minute)
	s.Expect("ns/js", "job-a", "uid-1")
	shows := func(cached string) func(string) bool { return func(want string) bool { return want == cached } }
	if want, pending := s.Check("ns/js", "job-a", shows("")); !pending || want != "uid-1" {
		t.Fatalf("Check before the cache shows it: %q %v, want uid-1 pending", want, pending)
	}
	if _, pending := s.Check("ns/js", "job-a", shows("uid-1")); pending {
		t.Fatal("Check after the cache shows it: still pending")
	}
	if _, pending := s.Pending("ns/js", "job-a"); pending || s.Len() != 0 {
		t.Fatalf("the shown item is still remembered (len %d)", s.Len())
	}
}

func TestExpectationsLapse(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	s := New[int](clk, time.Minute)
	s.Expect("g", "a", 1)
	clk.SetTime(t0.Add(30 * time.Second))
	s.Expect("g", "b", 2)
	never := func(int) bool { return false }
	clk.SetTime(t0.Add(time.Minute))
	if _, pending := s.Pending("g", "a"); pending || s.Has("g", "a") {
		t.Error("a is pending after its timeout")
	}
	if !s.Has("g", "b") {
		t.Error("b is not pending before its timeout")
	}
	if _, pending := s.Check("g", "a", never); pending {
		t.Error("Check: a is pending after its timeout")
	}
	if v, pending := s.Check("g", "b", never); !pending || v != 2 {
		t.Errorf("b: %d %v, want 2 pending", v, pending)
	}
	clk.SetTime(t0.Add(2 * time.Minute))
	s.Sweep()
	if n := s.Len(); n != 0 {
		t.Errorf("Sweep left %d items", n)
	}
}

func TestSettle(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	s := New[string](clk, time.Minute)
	s.Expect("ns/js", "a", "uid-a")
	s.Expect("ns/js", "b", "uid-b")
	s.Expect("ns/other", "c", "uid-c")
	cache := map[string]string{"a": "uid-a", "b": "uid-old"}
	shows := func(item, want string) bool { return cache[item] == want }
	if s.Settle("ns/js", shows) {
		t.Fatal("settled while b is not in the cache")
	}
	if _, pending := s.Pending("ns/js", "a"); pending {
		t.Error("a, shown by the cache, is still pending")
	}
	cache["b"] = "uid-b"
	if !s.Settle("ns/js", shows) {
		t.Error("not settled once the cache shows every item")
	}
	if !s.Settle("ns/empty", shows) {
		t.Error("a group without expectations is not settled")
	}
	if _, pending := s.Pending("ns/other", "c"); !pending {
		t.Error("settling one group dropped another's items")
	}
	clk.SetTime(t0.Add(time.Minute))
	if !s.Settle("ns/other", func(string, string) bool { return false }) {
		t.Error("a timed-out group is not settled")
	}
}

func TestUpdateDropForget(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	s := New[int](clk, time.Minute)
	s.Update("g", "a", func(int) int { return 5 })
	if _, pending := s.Pending("g", "a"); pending {
		t.Fatal("Update created an item")
	}
	s.Expect("g", "a", 1)
	clk.SetTime(t0.Add(50 * time.Second))
	s.Update("g", "a", func(v int) int { return v + 1 })
	if v, _ := s.Pending("g", "a"); v != 2 {
		t.Errorf("after Update: %d, want 2", v)
	}
	clk.SetTime(t0.Add(time.Minute))
	if _, pending := s.Pending("g", "a"); pending {
		t.Error("Update restarted the timeout")
	}
	s.Expect("g", "a", 1)
	s.Expect("g", "b", 1)
	s.Drop("g", "a")
	if _, pending := s.Pending("g", "a"); pending {
		t.Error("a is pending after Drop")
	}
	s.Forget("g")
	if s.Len() != 0 {
		t.Errorf("Forget left %d items", s.Len())
	}
}

// After a burst of groups is settled the store gives their memory back
// (a Go map keeps its buckets when its entries are deleted), and it goes on
// working.
func TestSettledBurstIsReleased(t *testing.T) {
	const groups = 100000
	s := New[int](clocktesting.NewFakePassiveClock(t0), time.Minute)
	before := liveHeap()
	for i := 0; i < groups; i++ {
		s.Expect(fmt.Sprintf("ns/js-%06d", i), "job", i)
	}
	full := liveHeap() - before
	for i := 0; i < groups; i++ {
		if _, pending := s.Check(fmt.Sprintf("ns/js-%06d", i), "job", func(int) bool { return true }); pending {
			t.Fatalf("group %d still pending after the cache showed it", i)
		}
	}
	left := liveHeap() - before
	t.Logf("held after the burst: %d of %d bytes", left, full)
	if s.Len() != 0 || left > full/40 {
		t.Fatalf("after every group settled: %d items, %d of %d bytes still held", s.Len(), left, full)
	}
	s.Expect("ns/js", "job", 1)
	if v, pending := s.Pending("ns/js", "job"); !pending || v != 1 {
		t.Fatalf("an expectation after the burst: %d %v, want 1 pending", v, pending)
	}
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
