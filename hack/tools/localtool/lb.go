package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// runLB is "localtool lb -listen ADDR -backends ADDR,ADDR,...": a TCP load
// balancer on loopback standing in for a Service's endpoints where no
// kube-proxy runs. Each new connection goes to the next backend in turn;
// when that one refuses, the others are tried in order, so a killed
// replica costs only the connections that were open to it.
func runLB(args []string) error {
	fs := flag.NewFlagSet("lb", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on (loopback, or an address of -listen-interface)")
	iface := fs.String("listen-interface", "", "an interface (the real node's bridge) whose addresses -listen may use")
	backends := fs.String("backends", "", "comma-separated backend addresses (loopback only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lb, err := newLB(*listen, *iface, strings.Split(*backends, ","))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return lb.serve(ctx)
}

type loadBalancer struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	dialWait time.Duration
}

func newLB(listen, iface string, backends []string) (*loadBalancer, error) {
	if err := requireLoopback(listen); err != nil && !onInterface(listen, iface) {
		return nil, fmt.Errorf("-listen: %w", err)
	}
	var bs []string
	for _, b := range backends {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if err := requireLoopback(b); err != nil {
			return nil, fmt.Errorf("-backends: %w", err)
		}
		bs = append(bs, b)
	}
	if len(bs) == 0 {
		return nil, errors.New("-backends: at least one backend is required")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return &loadBalancer{ln: ln, backends: bs, dialWait: 2 * time.Second}, nil
}

// onInterface reports whether addr's host is an address of the interface
// named iface.
func onInterface(addr, iface string) bool {
	if iface == "" {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return false
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == host {
			return true
		}
	}
	return false
}

func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", addr)
	}
	return nil
}

// serve accepts connections until ctx ends.
func (lb *loadBalancer) serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		_ = lb.ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lb.handle(ctx, c)
		}()
	}
}

// dial connects to the next backend in turn, failing over to the others.
func (lb *loadBalancer) dial(ctx context.Context) (net.Conn, error) {
	start := lb.next.Add(1) - 1
	var errs []error
	for i := range lb.backends {
		b := lb.backends[(start+uint64(i))%uint64(len(lb.backends))]
		d := net.Dialer{Timeout: lb.dialWait}
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (lb *loadBalancer) handle(ctx context.Context, client net.Conn) {
	defer client.Close()
	backend, err := lb.dial(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localtool lb: no backend for %s: %v\n", client.RemoteAddr(), err)
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the half-close on, so that either side sees the other's end.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	select {
	case <-done:
	case <-ctx.Done():
	}
	// One direction ended: a reset or a kill ends the other at once.
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
}
