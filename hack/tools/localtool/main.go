// Command localtool runs the local development cluster: it starts and stops
// every process of it (package cluster, and package node for the real
// node), and has the small helpers the cluster needs, so that it needs
// neither openssl nor curl. It uses the Go standard library only.
//
//	localtool up    [--detach] [--demo]   start the cluster (settings from the environment; -h lists them)
//	localtool down  [--clean | --purge]   stop it
//	localtool ca    -out DIR/NAME -cn COMMON_NAME
//	localtool cert  -ca DIR/CA -out DIR/NAME -cn CN [-o ORG,...] [-san HOST_OR_IP,...] [-server] [-client]
//	localtool key   -out DIR/NAME
//	localtool probe [-cacert FILE] [-cert FILE -key FILE] [-timeout 2s] URL
//	localtool lb    -listen 127.0.0.1:PORT [-listen-interface BRIDGE] -backends 127.0.0.1:A,127.0.0.1:B,...
//	localtool node  up|down -local-dir DIR -bin-dir DIR [flags]
//
// hack/local-up.sh and hack/local-down.sh build what is needed and then run
// "up" and "down".
//
// "ca", "cert" and "key" write certificates and keys (package pki); they
// are idempotent. "probe" makes one GET request and exits 0 only on a 200
// response (package probe). "lb" is a round-robin TCP load balancer on
// loopback with failover (lb.go): the local stand-in for a Service's
// endpoints in front of several jobset-apiserver replicas; with
// -listen-interface it may also listen on an address of that interface (the
// real node's bridge, where pods reach kube-apiserver). "node" starts and
// stops the real node alone.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nativejobset/jobset/hack/tools/localtool/cluster"
	"github.com/nativejobset/jobset/hack/tools/localtool/node"
	"github.com/nativejobset/jobset/hack/tools/localtool/pki"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = cluster.UpMain(os.Args[2:])
	case "down":
		err = cluster.DownMain(os.Args[2:])
	case "ca":
		err = runCA(os.Args[2:])
	case "cert":
		err = runCert(os.Args[2:])
	case "key":
		err = runKey(os.Args[2:])
	case "probe":
		err = runProbe(os.Args[2:])
	case "lb":
		err = runLB(os.Args[2:])
	case "node":
		err = node.Main(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localtool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localtool up|down|ca|cert|key|probe|lb|node [flags]; see the package comment")
	os.Exit(2)
}

func runCA(args []string) error {
	fs := flag.NewFlagSet("ca", flag.ExitOnError)
	out := fs.String("out", "", "output path without extension")
	cn := fs.String("cn", "", "common name")
	_ = fs.Parse(args)
	if *out == "" || *cn == "" {
		return errors.New("-out and -cn are required")
	}
	created, err := pki.EnsureCA(*out, *cn)
	if created {
		fmt.Printf("created CA %s.crt (%s)\n", *out, *cn)
	}
	return err
}

func runCert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ExitOnError)
	var r pki.Cert
	fs.StringVar(&r.CA, "ca", "", "CA path without extension")
	fs.StringVar(&r.Out, "out", "", "output path without extension")
	fs.StringVar(&r.CN, "cn", "", "common name (the user name for client certificates)")
	orgs := fs.String("o", "", "comma-separated organizations (the groups for client certificates)")
	sans := fs.String("san", "", "comma-separated DNS names and IP addresses")
	fs.BoolVar(&r.Server, "server", false, "allow server authentication")
	fs.BoolVar(&r.Client, "client", false, "allow client authentication")
	_ = fs.Parse(args)
	if r.CA == "" || r.Out == "" || r.CN == "" || (!r.Server && !r.Client) {
		return errors.New("-ca, -out, -cn and at least one of -server/-client are required")
	}
	r.Orgs, r.SANs = splitList(*orgs), splitList(*sans)
	created, err := pki.EnsureCert(r)
	if created {
		fmt.Printf("created %s.crt (CN=%s)\n", r.Out, r.CN)
	}
	return err
}

func runKey(args []string) error {
	fs := flag.NewFlagSet("key", flag.ExitOnError)
	out := fs.String("out", "", "output path without extension")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("-out is required")
	}
	created, err := pki.EnsureKeyPair(*out)
	if created {
		fmt.Printf("created key pair %s.key\n", *out)
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
