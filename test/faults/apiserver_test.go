package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAPIServerReplicaKilledDuringWrites runs six clients creating,
// patching and deleting JobSets through kube-apiserver, kills one of the
// two jobset-apiserver replicas with SIGKILL once 150 writes were
// acknowledged, starts it again after another 150, and stops after 100
// more. Clients see only retryable errors, and every acknowledged create,
// patch and delete is reflected afterwards.
func TestAPIServerReplicaKilledDuringWrites(t *testing.T) {
	ns := namespace(t, "apiwrites")
	l, st := newLedger(), newStats()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w%d-%04d", w, i)
				js := jobSet(ns, name, 1, 1)
				js.Spec.Suspend = boolPtr(true) // the writes are the subject here, not the Jobs
				if createJobSet(ctx, l, st, js) != nil {
					continue // unknown outcome or refused: leave the name alone
				}
				acked.Add(1)
				for seq := 1; seq <= 2; seq++ {
					if patchLabel(ctx, l, st, ns, name, seq) == nil {
						acked.Add(1)
					}
				}
				if i%2 == 0 && deleteJobSet(ctx, l, st, ns, name) == nil {
					acked.Add(1)
				}
			}
		}()
	}
	waitAcked := func(n int64, what string) {
		eventually(t, 3*time.Minute, what, func(context.Context) (bool, error) { return acked.Load() >= n, nil })
	}
	waitAcked(150, "150 acknowledged writes")
	// The aggregator keeps long-lived HTTP/2 connections, so the balancer,
	// which spreads connections, may leave one replica without requests:
	// kill the one with more connections open.
	victim, conns := busiestReplica(t)
	p := kill(t, victim)
	t.Logf("killed %s (pid %d, %v connections open per replica) after %d acknowledged writes", victim, p.PID, conns, acked.Load())
	at := acked.Load()
	waitAcked(at+150, "150 more acknowledged writes with one replica")
	revive(t, "killed by "+t.Name())
	at = acked.Load()
	waitAcked(at+100, "100 more acknowledged writes with both replicas")
	cancel()
	wg.Wait()

	p99 := st.p99()
	st.mu.Lock()
	t.Logf("%d writes acknowledged; errors by code: %v; p99 latency %s", st.acked, st.errors, p99)
	for _, e := range st.unretried {
		t.Errorf("a client saw an error it cannot retry: %s", e)
	}
	st.mu.Unlock()

	var lost []string
	err := waitPoll(time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		lost, err = l.lost(ctx, ns)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("listing the JobSets: %v", err)
	}
	for _, x := range lost {
		t.Errorf("acknowledged write lost: %s", x)
	}
	t.Logf("checked %d JobSet names against the acknowledged writes", len(l.recs))
}

func boolPtr(b bool) *bool { return &b }

// busiestReplica returns the API server replica with the most established
// TCP connections to its port, and the count of each.
func busiestReplica(t *testing.T) (string, map[string]int) {
	t.Helper()
	conns := map[string]int{}
	best := apiservers[0]
	for _, name := range apiservers {
		conns[name] = establishedTo(replicaPort(name))
		if conns[name] > conns[best] {
			best = name
		}
	}
	return best, conns
}

// establishedTo counts the established IPv4 TCP connections whose local
// port is port (/proc/net/tcp: state 01).
func establishedTo(port int) int {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "01" {
			continue
		}
		i := strings.LastIndex(f[1], ":")
		if p, err := strconv.ParseInt(f[1][i+1:], 16, 32); err == nil && int(p) == port {
			n++
		}
	}
	return n
}
