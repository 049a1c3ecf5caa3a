// Command release builds what a release of JobSet ships: OCI images, the
// install manifests, the Helm chart package, SBOMs and checksums. It is a
// module of its own so that the product's go.mod carries none of its
// dependencies. The Makefile runs it; each subcommand is one step:
//
//	go run . images --root ../.. --out ../../_output/images --version v0.1.0 --commit <sha> ...
//	go run . push --images ../../_output/images --registry ghcr.io/nativejobset
//	go run . bundle --root ../.. --images ../../_output/images --out ../../_output/release --version v0.1.0
//	go run . node-images --out ../../_output/node-images [--busybox /bin/busybox]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nativejobset/jobset/hack/release/bundle"
	"github.com/nativejobset/jobset/hack/release/image"
	"github.com/nativejobset/jobset/hack/release/nodeimage"
)

// subcommands, in the order usage lists them.
var subcommands = []struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}{
	{"images", "build the OCI images of the binaries (an OCI layout and archives per image, and images.json)", runImages},
	{"push", "push the images built by 'images' to a registry", runPush},
	{"bundle", "write the release bundle from the images built by 'images': manifests pinned by digest, chart, archives, SBOMs, SHA256SUMS", runBundle},
	{"node-images", "build the local node's pause and busybox images as archives for 'ctr images import'", runNodeImages},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./hack/release <subcommand> [flags]  (-h after a subcommand lists its flags)")
	fmt.Fprintln(w, "subcommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" {
		usage(os.Stdout)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range subcommands {
		if c.name != os.Args[1] {
			continue
		}
		err := c.run(ctx, os.Args[2:])
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "release %s: %v\n", c.name, err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintf(os.Stderr, "release: unknown subcommand %q\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}

// parse parses args into fs and rejects positional arguments, which no
// subcommand takes.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

func runImages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	o := image.Options{Log: os.Stderr}
	var platforms, names, created string
	fs.StringVar(&o.Root, "root", "../..", "repository root")
	fs.StringVar(&o.Out, "out", "../../_output/images", "output directory")
	fs.StringVar(&o.Version, "version", "", "version: the images' tag and the binaries' --version (required)")
	fs.StringVar(&o.Commit, "commit", "", "full commit the images are built from (required)")
	fs.StringVar(&created, "created", "", "time of the images and their files, RFC 3339 or Unix seconds; default $SOURCE_DATE_EPOCH, else the commit's committer time")
	fs.StringVar(&o.Repository, "repository", "ghcr.io/nativejobset", "repository prefix of the image references")
	fs.StringVar(&platforms, "platforms", strings.Join(image.DefaultPlatforms, ","), "comma-separated os/arch list")
	fs.StringVar(&o.Tags, "tags", "", "Go build tags, comma-separated")
	fs.StringVar(&names, "names", "", "comma-separated subset of the images (default all: "+strings.Join(image.Names, ",")+")")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Platforms = splitList(platforms)
	o.Names = splitList(names)
	if created == "" {
		created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	var err error
	if o.Created, err = createdTime(ctx, created, o.Root, o.Commit); err != nil {
		return err
	}
	m, err := image.Build(ctx, o)
	if err != nil {
		return err
	}
	for _, img := range m.Images {
		fmt.Printf("%s@%s\n", img.Reference, img.IndexDigest)
	}
	return nil
}

func runPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var dir, registry, version string
	fs.StringVar(&dir, "images", "../../_output/images", "directory written by 'images' (with images.json)")
	fs.StringVar(&registry, "registry", "", "registry and path to push to, e.g. ghcr.io/nativejobset (required)")
	fs.StringVar(&version, "version", "", "if set, the version the images must have been built for")
	if err := parse(fs, args); err != nil {
		return err
	}
	if registry == "" {
		return fmt.Errorf("--registry is required")
	}
	pushed, err := image.PushAll(ctx, dir, registry, version)
	for _, d := range pushed {
		fmt.Println(d)
	}
	return err
}

func runBundle(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("bundle", flag.ContinueOnError)
	var o bundle.Options
	fs.StringVar(&o.Root, "root", "../..", "repository root")
	fs.StringVar(&o.Images, "images", "../../_output/images", "directory written by 'images' (with images.json)")
	fs.StringVar(&o.Out, "out", "../../_output/release", "the bundle's directory (emptied first)")
	fs.StringVar(&o.Version, "version", "", "the release version; the images must have been built for it (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Version == "" {
		return fmt.Errorf("--version is required")
	}
	files, err := bundle.Write(o)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Println(filepath.Join(o.Out, f))
	}
	return nil
}

func runNodeImages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-images", flag.ContinueOnError)
	o := image.NodeOptions{Log: os.Stderr}
	fs.StringVar(&o.Root, "root", "../..", "repository root")
	fs.StringVar(&o.Out, "out", "../../_output/node-images", "output directory for "+nodeimage.PauseArchive+" and "+nodeimage.BusyboxArchive)
	fs.StringVar(&o.Busybox, "busybox", "", "static linux/amd64 busybox binary (default: busybox on PATH, else /bin/busybox or /usr/bin/busybox)")
	fs.StringVar(&o.Images, "images", "", "output directory of 'make images'; when set, also "+nodeimage.BusyboxInPlaceAgentArchive+" (busybox with the in-place agent)")
	if err := parse(fs, args); err != nil {
		return err
	}
	imgs, err := image.BuildNodeImages(ctx, o)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		fmt.Fprintf(os.Stderr, "wrote %s\n", img.Archive)
		fmt.Println(img.Reference)
	}
	return nil
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

// createdTime parses s (RFC 3339 or Unix seconds), or when empty asks git
// for the committer time of commit.
func createdTime(ctx context.Context, s, root, commit string) (time.Time, error) {
	if s == "" {
		if commit == "" {
			return time.Time{}, fmt.Errorf("--commit is required")
		}
		out, err := exec.CommandContext(ctx, "git", "-C", root, "show", "-s", "--format=%ct", commit).Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("the time of commit %s (git show): %w; pass --created or SOURCE_DATE_EPOCH", commit, err)
		}
		s = strings.TrimSpace(string(out))
	}
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("creation time %q is neither RFC 3339 nor Unix seconds", s)
	}
	return t.UTC(), nil
}
