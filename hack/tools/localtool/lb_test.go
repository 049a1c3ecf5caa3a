package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
)

// namedBackend answers every line with its name.
func namedBackend(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					fmt.Fprintln(c, name)
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, "who")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading through the balancer: %v", err)
	}
	return strings.TrimSpace(line)
}

func startLB(t *testing.T, backends ...string) *loadBalancer {
	t.Helper()
	lb, err := newLB("127.0.0.1:0", "", backends)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- lb.serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lb
}

func TestLBRoundRobinAndFailover(t *testing.T) {
	a, b := namedBackend(t, "a"), namedBackend(t, "b")
	defer b.Close()
	lb := startLB(t, a.Addr().String(), b.Addr().String())
	addr := lb.ln.Addr().String()

	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		seen[ask(t, addr)]++
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Errorf("connections per backend = %v, want 3 each", seen)
	}

	// A backend that went away: every new connection reaches the other one.
	a.Close()
	for i := 0; i < 4; i++ {
		if got := ask(t, addr); got != "b" {
			t.Fatalf("connection %d went to %q after backend a closed, want b", i, got)
		}
	}
}

func TestLBClosesTheClientWhenNoBackendAnswers(t *testing.T) {
	a := namedBackend(t, "a")
	gone := a.Addr().String()
	a.Close()
	lb := startLB(t, gone)
	c, err := net.Dial("tcp", lb.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, "who")
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Fatalf("got %q with no backend, want the connection closed", line)
	}
}

func TestLBRefusesNonLoopbackAddresses(t *testing.T) {
	for _, tc := range []struct{ listen, backends string }{
		{"0.0.0.0:0", "127.0.0.1:1"},
		{"127.0.0.1:0", "10.0.0.1:443"},
		{"127.0.0.1:0", ""},
	} {
		if lb, err := newLB(tc.listen, "", strings.Split(tc.backends, ",")); err == nil {
			lb.ln.Close()
			t.Errorf("newLB(%q, %q) succeeded, want an error", tc.listen, tc.backends)
		}
	}
}
