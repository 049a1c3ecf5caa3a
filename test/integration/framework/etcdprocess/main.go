// Command etcdprocess runs the embedded etcd as a process of its own, so
// that tests can stall it (SIGSTOP) or kill it without the API server.
// Usage: etcdprocess <data dir> <loopback port>
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: etcdprocess <data dir> <port>")
		os.Exit(2)
	}
	port, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := embeddedetcd.Start(embeddedetcd.Config{Dir: os.Args[1], ClientPort: port})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("serving", s.ClientURL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Stop()
}
