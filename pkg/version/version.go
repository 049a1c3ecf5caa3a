// Package version tells which build of JobSet a binary is. Release builds
// stamp it with the linker:
//
//	-ldflags "-X github.com/nativejobset/jobset/pkg/version.version=v0.1.0
//	          -X github.com/nativejobset/jobset/pkg/version.commit=<sha>"
//
// ('make build' and 'make images' do). An unstamped binary (go build, go
// run, go test) falls back to what the Go toolchain recorded in it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X); empty when not stamped.
var (
	version string
	commit  string
)

// DevVersion is reported by a binary that is neither stamped nor built
// as a versioned module (go build in a checkout).
const DevVersion = "v0.0.0-dev"

// UnknownCommit is reported when neither the linker nor the toolchain
// recorded a commit (e.g. -buildvcs=false).
const UnknownCommit = "unknown"

// Info is the build of the running binary.
type Info struct {
	Version   string
	Commit    string
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// Get returns the build of the running binary.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(version, commit, bi)
}

// resolve prefers the stamped values and fills in the rest from bi.
func resolve(stampedVersion, stampedCommit string, bi *debug.BuildInfo) Info {
	info := Info{
		Version:   stampedVersion,
		Commit:    stampedCommit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil && bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" {
		info.Version = DevVersion
		// "(devel)" is what go build records for the main module of a
		// checkout without VCS information.
		if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Commit == "" {
		info.Commit = UnknownCommit
		if bi != nil {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && s.Value != "" {
					info.Commit = s.Value
				}
			}
		}
	}
	return info
}

// String is the line a binary prints for --version, e.g.
// "jobset-controller v0.1.0 (commit 0123abcd…, go1.26.8, linux/amd64)".
func (i Info) String(name string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s)", name, i.Version, i.Commit, i.GoVersion, i.Platform)
}

// String is Get().String(name).
func String(name string) string {
	return Get().String(name)
}
