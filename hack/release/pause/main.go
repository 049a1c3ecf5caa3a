// Command pause is PID 1 of a pod sandbox on the local test cluster's
// node (the entrypoint of the nodeimage.Pause image). It holds the pod's
// namespaces open by doing nothing: it blocks until SIGINT or SIGTERM and
// then exits 0. As PID 1 of the pod's PID namespace (when the pod shares
// it) it inherits orphaned processes, so it reaps every child that exits
// lest they stay zombies.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Children that exited before Notify sent no SIGCHLD we could see.
	reap()
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap waits for every child that has exited, without blocking, and
// returns how many it reaped. One SIGCHLD may stand for several exits,
// since the kernel does not queue it, so it loops until none is left.
func reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		// pid 0: children remain but none has exited; ECHILD: no children.
		if err != nil || pid <= 0 {
			return n
		}
		n++
	}
}
