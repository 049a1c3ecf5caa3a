package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nativejobset/jobset/hack/tools/localtool/node"
)

// DownMain runs "localtool down [--clean | --purge]": the real node first
// (with everything it left on the host), then every program through its
// pid file (SIGTERM, SIGKILL after STOP_TIMEOUT seconds, default 20) in
// stop order, etcd last. It never signals a process it did not start.
// --clean also deletes the cluster's data (not its certificates and
// kubeconfigs); --purge deletes LOCAL_DIR.
func DownMain(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	clean := fs.Bool("clean", false, "also delete the cluster data (etcd, jobset-apiserver's embedded etcd); certificates and kubeconfigs are kept")
	purge := fs.Bool("purge", false, "delete LOCAL_DIR altogether")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cfg, err := FromEnv(root, os.Getenv)
	if err != nil {
		return err
	}
	c := newCluster(context.Background(), cfg, os.Stdout)
	if err := c.stopAll(); err != nil {
		return err
	}
	switch {
	case *purge:
		c.logf("removing %s", c.LocalDir)
		err = os.RemoveAll(c.LocalDir)
	case *clean:
		c.logf("removing %s", c.data())
		err = os.RemoveAll(c.data())
	}
	if err != nil {
		return err
	}
	c.logf("local cluster in %s stopped", c.LocalDir)
	return nil
}

// stopTimeout is how long a program has between SIGTERM and SIGKILL.
func stopTimeout() time.Duration {
	var s int
	if _, err := fmt.Sscan(os.Getenv("STOP_TIMEOUT"), &s); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 20 * time.Second
}

// stopAll stops the real node and every program, also those with a pid
// file that this version does not know (a test may have started them).
// What it cannot stop is reported, and nothing else is removed then.
func (c *Cluster) stopAll() error {
	var errs []string
	if _, err := os.Stat(c.data("node")); err == nil {
		if err := node.Main([]string{"down", "-local-dir", c.LocalDir, "-bin-dir", c.BinDir, "-bridge-address", c.BridgeAddress.String()}); err != nil {
			errs = append(errs, "the real node: "+err.Error())
		}
	}
	timeout := stopTimeout()
	for _, name := range stopOrder {
		if err := c.procs.Stop(name, timeout); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, name := range c.procs.Recorded() {
		if slices.Contains(stopOrder, name) {
			continue
		}
		if err := c.procs.Stop(name, timeout); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("some processes of %s are still running; nothing removed:\n  %s", c.LocalDir, strings.Join(errs, "\n  "))
	}
	return nil
}
