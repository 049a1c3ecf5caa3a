// Package sbom describes a Go binary as a CycloneDX SBOM, from the build
// information the Go linker embeds in it (the modules and settings it was
// built with), so the SBOM lists what is in the binary rather than what a
// go.mod allows.
package sbom

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// specVersion is the CycloneDX version written.
const specVersion = cdx.SpecVersion1_6

// FromBinary returns a CycloneDX JSON SBOM of the Go binary at path: name
// and version name the binary (the main component), created is the SBOM's
// timestamp. The output depends on nothing else, so equal inputs give equal
// bytes.
func FromBinary(path, name, version string, created time.Time) ([]byte, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: not a Go binary with build information: %w", path, err)
	}
	if name == "" || version == "" {
		return nil, fmt.Errorf("%s: the SBOM needs a name and a version", path)
	}
	return encode(fromBuildInfo(bi, name, version, created))
}

func fromBuildInfo(bi *debug.BuildInfo, name, version string, created time.Time) *cdx.BOM {
	mainPath := bi.Main.Path
	if mainPath == "" {
		// Built from files outside any module ('go build x.go').
		mainPath = bi.Path
	}
	main := cdx.Component{
		BOMRef:     purl(mainPath, version),
		Type:       cdx.ComponentTypeApplication,
		Name:       name,
		Version:    version,
		PackageURL: purl(mainPath, version),
		Properties: buildProperties(bi),
	}

	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	// The standard library and runtime are compiled into the binary by
	// the toolchain: scanners look them up as pkg:golang/stdlib.
	std := cdx.Component{
		BOMRef:      purl("stdlib", goVersion),
		Type:        cdx.ComponentTypeLibrary,
		Name:        "stdlib",
		Version:     bi.GoVersion,
		Description: "Go standard library and runtime, from the Go toolchain " + bi.GoVersion,
		PackageURL:  purl("stdlib", goVersion),
	}
	components := []cdx.Component{std}
	dependsOn := []string{std.BOMRef}
	seen := map[string]bool{std.BOMRef: true}
	for _, dep := range bi.Deps {
		c := moduleComponent(dep)
		// Two requirements replaced by one module would give two
		// components with one bom-ref, which CycloneDX forbids.
		if seen[c.BOMRef] {
			continue
		}
		seen[c.BOMRef] = true
		components = append(components, c)
		dependsOn = append(dependsOn, c.BOMRef)
	}

	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication,
			Name: "github.com/nativejobset/jobset/hack/release/sbom",
		}}},
		Component: &main,
	}
	bom.Components = &components
	// Build information lists the modules linked in, but not who
	// requires whom: the graph says only that the binary uses them all.
	bom.Dependencies = &[]cdx.Dependency{{Ref: main.BOMRef, Dependencies: &dependsOn}}
	return bom
}

// moduleComponent describes one module of the binary. A replaced module is
// described by its replacement, which is the code linked in.
func moduleComponent(m *debug.Module) cdx.Component {
	path, version, sum := m.Path, m.Version, m.Sum
	var props []cdx.Property
	if r := m.Replace; r != nil {
		props = append(props, cdx.Property{Name: "go.module.replaces", Value: m.Path + "@" + m.Version})
		if r.Version == "" || r.Version == "(devel)" {
			// A directory on the build machine: it keeps the module's
			// path but has no version to name it by.
			version, sum = "", ""
			props = append(props, cdx.Property{Name: "go.module.directory", Value: r.Path})
		} else {
			path, version, sum = r.Path, r.Version, r.Sum
		}
	}
	if sum != "" {
		props = append(props, cdx.Property{Name: "go.module.sum", Value: sum})
	}
	c := cdx.Component{
		BOMRef:     purl(path, version),
		Type:       cdx.ComponentTypeLibrary,
		Name:       path,
		Version:    version,
		PackageURL: purl(path, version),
	}
	if len(props) > 0 {
		c.Properties = &props
	}
	return c
}

// buildProperties returns the build settings (GOOS, GOARCH, -tags,
// vcs.revision, ...) in the order the binary records them.
func buildProperties(bi *debug.BuildInfo) *[]cdx.Property {
	props := []cdx.Property{{Name: "go.version", Value: bi.GoVersion}}
	if bi.Path != "" {
		props = append(props, cdx.Property{Name: "go.package", Value: bi.Path})
	}
	for _, s := range bi.Settings {
		props = append(props, cdx.Property{Name: "go.build." + strings.TrimPrefix(s.Key, "-"), Value: s.Value})
	}
	return &props
}

// purl returns the package URL of a Go module, pkg:golang/<path>@<version>,
// with each path segment and the version percent-encoded.
func purl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" {
		// PathEscape leaves '+' (v2.0.0+incompatible) alone; the purl
		// spec wants it encoded.
		p += "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
	}
	return p
}

// encode writes bom as JSON with a serial number derived from the rest of
// its content: stable across runs, and distinct for distinct SBOMs.
func encode(bom *cdx.BOM) ([]byte, error) {
	bom.SerialNumber = ""
	body, err := encodeJSON(bom)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	u := sum[:16]
	// RFC 9562 version 8 (custom) UUID, variant 10.
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	bom.SerialNumber = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	return encodeJSON(bom)
}

func encodeJSON(bom *cdx.BOM) ([]byte, error) {
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, specVersion); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
