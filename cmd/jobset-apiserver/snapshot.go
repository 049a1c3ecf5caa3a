package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/nativejobset/jobset/pkg/embeddedetcd"
	"github.com/nativejobset/jobset/pkg/etcdsnapshot"
)

const snapshotUsage = `Usage:
  jobset-apiserver snapshot save FILE|- [--embedded-etcd-dir=DIR | --etcd-servers=URL ... | --from-pod=NS/POD]
  jobset-apiserver snapshot save --into-dir=DIR [--keep=N] [source flags as above]
      Take a consistent snapshot of the JobSet store while the server runs:
      from the embedded etcd through the unix socket in DIR (run it where
      the server runs, e.g. kubectl exec), from one external etcd member,
      or from the embedded etcd of the server's pod NS/POD through the
      pods/exec subresource (a scheduled backup's CronJob does this).
      FILE must not exist; "-" writes the snapshot to standard output.
      --into-dir names the file after the time (jobsets-<UTC time>.db) and
      then removes all but the newest N such files there.
  jobset-apiserver snapshot status FILE
      Check a snapshot (checksum, database integrity) and print its revision
      and key count.
  jobset-apiserver snapshot restore FILE|- --data-dir=DIR [--replace-existing]
      Create an etcd data directory from a snapshot ("-": standard input),
      by default for the embedded etcd (jobset-apiserver --embedded-etcd-dir=DIR);
      --name, --initial-advertise-peer-urls, --initial-cluster and
      --initial-cluster-token restore a member of an external etcd instead.
      Stop the server first.
`

// runSnapshot runs `jobset-apiserver snapshot ...`.
func runSnapshot(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, snapshotUsage)
		return errors.New("snapshot needs a command: save, status or restore")
	}
	switch args[0] {
	case "save":
		return snapshotSave(args[1:], stdout, stderr)
	case "status":
		return snapshotStatus(args[1:], stdout, stderr)
	case "restore":
		return snapshotRestore(args[1:], stdin, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, snapshotUsage)
		return nil
	}
	fmt.Fprint(stderr, snapshotUsage)
	return fmt.Errorf("unknown snapshot command %q: use save, status or restore", args[0])
}

// parseOne parses fs and returns its single positional argument.
func parseOne(fs *pflag.FlagSet, args []string, what string) (string, error) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return "", fmt.Errorf("snapshot %s: %w", fs.Name(), err)
	}
	if fs.NArg() != 1 {
		return "", fmt.Errorf("snapshot %s needs exactly one argument, %s (got %d)", fs.Name(), what, fs.NArg())
	}
	return fs.Arg(0), nil
}

func snapshotSave(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("save", pflag.ContinueOnError)
	dir := fs.String("embedded-etcd-dir", "/var/lib/jobset-apiserver/etcd", "The running server's --embedded-etcd-dir: the snapshot is read through the etcd socket there.")
	port := fs.Int("embedded-etcd-client-port", 0, "The running server's --embedded-etcd-client-port, if it serves the embedded etcd on a loopback port instead of the socket.")
	servers := fs.StringSlice("etcd-servers", nil, "One member of an external etcd to read the snapshot from, instead of the embedded etcd.")
	caFile := fs.String("etcd-cafile", "", "CA bundle of the external etcd.")
	certFile := fs.String("etcd-certfile", "", "Client certificate for the external etcd.")
	keyFile := fs.String("etcd-keyfile", "", "Client key for the external etcd.")
	fromPod := fs.String("from-pod", "", "NAMESPACE/NAME of a jobset-apiserver pod with an embedded etcd: the snapshot is taken there (in its --embedded-etcd-dir) through pods/exec, which needs create on pods/exec for that pod.")
	container := fs.String("container", "apiserver", "With --from-pod: the server's container.")
	kubeconfig := fs.String("kubeconfig", "", "With --from-pod: the kubeconfig to reach the cluster with (default: the pod's ServiceAccount).")
	intoDir := fs.String("into-dir", "", "Write the snapshot into this directory as jobsets-<UTC time>.db instead of to FILE.")
	keep := fs.Int("keep", 0, "With --into-dir: after a successful snapshot, remove all but the newest N jobsets-*.db files there (0 keeps every one).")
	timeout := fs.Duration("timeout", 10*time.Minute, "How long the snapshot may take.")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	var out string
	switch {
	case *intoDir == "" && fs.NArg() == 1:
		out = fs.Arg(0)
	case *intoDir == "":
		return fmt.Errorf("snapshot save needs exactly one argument, the file to write (or - for standard output), or --into-dir (got %d arguments)", fs.NArg())
	case fs.NArg() != 0:
		return fmt.Errorf("snapshot save: --into-dir names the file itself: give no FILE argument (got %q)", fs.Args())
	case *keep < 0:
		return fmt.Errorf("snapshot save: --keep=%d: want 0 (keep every snapshot) or more", *keep)
	default:
		if fi, err := os.Stat(*intoDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("snapshot save: --into-dir=%s is not a directory (%v)", *intoDir, err)
		}
		out = filepath.Join(*intoDir, etcdsnapshot.BackupName(time.Now()))
	}
	if *keep != 0 && *intoDir == "" {
		return errors.New("snapshot save: --keep goes with --into-dir")
	}
	if *fromPod != "" && len(*servers) > 0 {
		return errors.New("snapshot save: --from-pod and --etcd-servers name two sources: give one")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var saved etcdsnapshot.Saved
	var from string
	var err error
	if *fromPod != "" {
		p := podTarget{container: *container, kubeconfig: *kubeconfig}
		if p.namespace, p.name, err = parsePod(*fromPod); err != nil {
			return err
		}
		from = "pod " + *fromPod
		saved, err = saveFromPod(ctx, p, *dir, out, stdout, stderr)
	} else {
		var src etcdsnapshot.Source
		if src, err = etcdSource(*dir, *port, *servers, *caFile, *certFile, *keyFile); err != nil {
			return err
		}
		from = src.Endpoint
		if out == "-" {
			saved, err = etcdsnapshot.Save(ctx, src, stdout)
		} else {
			saved, err = etcdsnapshot.SaveFile(ctx, src, out)
		}
	}
	if err != nil {
		return err
	}
	if out == "-" {
		out = "standard output"
	}
	version := ""
	if saved.EtcdVersion != "" {
		version = " (etcd storage version " + saved.EtcdVersion + ")"
	}
	fmt.Fprintf(stderr, "snapshot of %d bytes%s from %s written to %s\n", saved.Bytes, version, from, out)
	if *intoDir == "" {
		return nil
	}
	// A scheduled backup says what it holds, so that its Job's log is a
	// record of each backup.
	if err := snapshotStatus([]string{out}, stderr, stderr); err != nil {
		return err
	}
	if *keep > 0 {
		removed, err := etcdsnapshot.Prune(*intoDir, *keep)
		for _, name := range removed {
			fmt.Fprintf(stderr, "removed the old snapshot %s (keeping the newest %d)\n", name, *keep)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// etcdSource is the etcd that a snapshot is taken from here: the embedded
// one through its socket (or loopback port), or one external member.
func etcdSource(dir string, port int, servers []string, caFile, certFile, keyFile string) (etcdsnapshot.Source, error) {
	var src etcdsnapshot.Source
	var err error
	switch len(servers) {
	case 0:
		if src.Endpoint, err = embeddedetcd.ClientURL(dir, port); err != nil {
			return src, err
		}
		if port == 0 {
			sock := strings.TrimPrefix(src.Endpoint, "unix://")
			if _, err := os.Stat(sock); err != nil {
				return src, fmt.Errorf("no embedded etcd socket at %s: run this where jobset-apiserver runs (e.g. kubectl exec into its pod, or --from-pod) with its --embedded-etcd-dir (%w)", sock, err)
			}
		}
	case 1:
		src.Endpoint = servers[0]
		if caFile != "" || certFile != "" || keyFile != "" {
			tlsInfo := transport.TLSInfo{TrustedCAFile: caFile, CertFile: certFile, KeyFile: keyFile}
			if src.TLS, err = tlsInfo.ClientConfig(); err != nil {
				return src, fmt.Errorf("--etcd-cafile/--etcd-certfile/--etcd-keyfile: %w", err)
			}
		}
	default:
		return src, fmt.Errorf("--etcd-servers: a snapshot is one member's state: give exactly one member, not %d", len(servers))
	}
	return src, nil
}

// saveFromPod writes the snapshot that the server's pod streams to out (a
// file, or standard output for "-").
func saveFromPod(ctx context.Context, p podTarget, embeddedEtcdDir, out string, stdout, stderr io.Writer) (etcdsnapshot.Saved, error) {
	r, err := streamFromPod(ctx, p, embeddedEtcdDir, stderr)
	if err != nil {
		return etcdsnapshot.Saved{}, err
	}
	defer r.Close()
	if out == "-" {
		n, err := io.Copy(stdout, r)
		return etcdsnapshot.Saved{Bytes: n}, err
	}
	return etcdsnapshot.CopyFile(r, out)
}

func snapshotStatus(args []string, stdout, _ io.Writer) error {
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	file, err := parseOne(fs, args, "the snapshot file")
	if err != nil {
		return err
	}
	st, err := etcdsnapshot.Inspect(file)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: checksum ok, revision %d, %d keys, %d bytes, etcd storage version %s\n",
		file, st.Revision, st.TotalKey, st.TotalSize, st.Version)
	return err
}

func snapshotRestore(args []string, stdin io.Reader, stderr io.Writer) error {
	fs := pflag.NewFlagSet("restore", pflag.ContinueOnError)
	member := etcdsnapshot.EmbeddedMember()
	dataDir := fs.String("data-dir", "", "The data directory to create: the server's --embedded-etcd-dir, or the external etcd member's --data-dir. Required.")
	replace := fs.Bool("replace-existing", false, "Allow a non-empty --data-dir: it is renamed to <dir>.replaced-<time> (not deleted) once the restore is complete.")
	bump := fs.Uint64("bump-revision", etcdsnapshot.DefaultRevisionBump, "How far to move the store's revision past the snapshot's, marking the old revisions compacted, so that clients that saw later resourceVersions relist; 0 keeps the snapshot's revision.")
	fs.StringVar(&member.Name, "name", member.Name, "The member's name (external etcd; the default is the embedded etcd's).")
	fs.StringVar(&member.PeerURL, "initial-advertise-peer-urls", member.PeerURL, "The member's peer URL (external etcd).")
	fs.StringVar(&member.InitialCluster, "initial-cluster", "", "Every member as name=peerURL,... (external etcd; default: this member alone).")
	fs.StringVar(&member.ClusterToken, "initial-cluster-token", member.ClusterToken, "The cluster token (external etcd).")
	file, err := parseOne(fs, args, "the snapshot file (or - for standard input)")
	if err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("snapshot restore: --data-dir is required")
	}
	if file == "-" {
		spooled, err := etcdsnapshot.Spool(stdin, filepath.Dir(filepath.Clean(*dataDir)))
		if err != nil {
			return err
		}
		defer os.Remove(spooled)
		file = spooled
	}
	r, err := etcdsnapshot.Restore(etcdsnapshot.RestoreOptions{
		Snapshot:        file,
		DataDir:         *dataDir,
		Member:          member,
		RevisionBump:    *bump,
		ReplaceExisting: *replace,
	})
	if err != nil {
		return err
	}
	if r.Replaced != "" {
		fmt.Fprintf(stderr, "the previous data directory was moved to %s\n", r.Replaced)
	}
	fmt.Fprintf(stderr, "restored into %s (member %s); start the server (or etcd) on it now\n", *dataDir, member.Name)
	return nil
}
