package apiserver

import (
	"runtime"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/nativejobset/jobset/pkg/version"
)

// servedVersion is the generic server's effective version with /version
// answering for this binary (its version and commit) instead of for the
// Kubernetes libraries it is built from, which would report an unstamped
// component-base. The Kubernetes version still decides the feature gates
// and what the server emulates, and stays in the emulation fields.
type servedVersion struct {
	basecompatibility.EffectiveVersion
	build version.Info
}

func (v servedVersion) Info() *apimachineryversion.Info {
	info := apimachineryversion.Info{}
	if base := v.EffectiveVersion.Info(); base != nil {
		info.EmulationMajor, info.EmulationMinor = base.EmulationMajor, base.EmulationMinor
		info.MinCompatibilityMajor, info.MinCompatibilityMinor = base.MinCompatibilityMajor, base.MinCompatibilityMinor
	}
	info.Major, info.Minor = majorMinor(v.build.Version)
	info.GitVersion = v.build.Version
	info.GitCommit = v.build.Commit
	info.GoVersion = v.build.GoVersion
	info.Compiler = runtime.Compiler
	info.Platform = v.build.Platform
	return &info
}

// majorMinor splits "v1.2.3-rc.1" into "1" and "2"; a version that is not
// of that form gives empty strings.
func majorMinor(v string) (string, string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 3 || !digits(parts[0]) || !digits(parts[1]) {
		return "", ""
	}
	return parts[0], parts[1]
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
