package apiserver

import (
	"testing"

	"k8s.io/apiserver/pkg/util/compatibility"

	"github.com/nativejobset/jobset/pkg/version"
)

func TestServedVersionAnswersForThisBinary(t *testing.T) {
	base := compatibility.DefaultBuildEffectiveVersion()
	build := version.Info{Version: "v1.4.2-rc.1", Commit: "0123abcd", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	got := servedVersion{EffectiveVersion: base, build: build}.Info()
	if got.GitVersion != build.Version || got.GitCommit != build.Commit || got.GoVersion != build.GoVersion || got.Platform != build.Platform {
		t.Errorf("info = %+v, want the build %+v", got, build)
	}
	if got.Major != "1" || got.Minor != "4" {
		t.Errorf("major, minor = %q, %q, want 1, 4", got.Major, got.Minor)
	}
	// What the server emulates stays the Kubernetes libraries' version.
	want := base.Info()
	if got.EmulationMajor != want.EmulationMajor || got.EmulationMinor != want.EmulationMinor || got.EmulationMinor == "" {
		t.Errorf("emulation %s.%s, want %s.%s", got.EmulationMajor, got.EmulationMinor, want.EmulationMajor, want.EmulationMinor)
	}
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string][2]string{
		"v0.12.0":             {"0", "12"},
		"v1.2.3-rc.1":         {"1", "2"},
		"v0.0.0-0123456789ab": {"0", "0"},
		version.DevVersion:    {"0", "0"},
		"1.2.3":               {"1", "2"},
		"v1.2":                {"", ""},
		"vx.2.3":              {"", ""},
		"":                    {"", ""},
		"v1..3":               {"", ""},
	} {
		if ma, mi := majorMinor(in); ma != want[0] || mi != want[1] {
			t.Errorf("majorMinor(%q) = %q, %q, want %q, %q", in, ma, mi, want[0], want[1])
		}
	}
}
