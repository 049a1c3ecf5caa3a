// Package chart renders, lints and packages the Helm chart charts/jobset
// with the Helm library, so that the release and the tests need no helm
// binary.
package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

// Render returns the chart's manifests as 'helm template' prints them:
// client-only, without contacting a cluster, hooks included. The chart has
// no CRDs.
func Render(chartDir, releaseName, namespace string, values map[string]any) ([]byte, error) {
	ch, err := load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = namespace
	// No release storage to check names against, as in 'helm template'.
	install.Replace = true
	rel, err := install.RunWithContext(context.Background(), ch, copyValues(values))
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", chartDir, err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("rendering chart %s: unexpected release type %T", chartDir, rel)
	}
	var out bytes.Buffer
	out.WriteString(r.Manifest)
	for _, h := range r.Hooks {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return out.Bytes(), nil
}

// LintNamespace is the release namespace lint renders the templates with.
const LintNamespace = "jobset-system"

// Lint runs helm's lint rules on the chart with the given values on top of
// the chart's own. It fails on error-level findings and returns the
// warnings (as strings) so that callers can decide about those.
func Lint(chartDir string, values map[string]any) (warnings []string, err error) {
	if _, err := os.Stat(filepath.Join(chartDir, chartutil.ChartfileName)); err != nil {
		return nil, fmt.Errorf("linting chart %s: %w", chartDir, err)
	}
	l := action.NewLint()
	l.Namespace = LintNamespace
	res := l.Run([]string{chartDir}, copyValues(values))
	var errs []error
	if res.TotalChartsLinted == 0 {
		// The chart could not be loaded at all; no messages explain why.
		errs = append(errs, res.Errors...)
	}
	for _, m := range res.Messages {
		switch {
		case m.Severity >= support.ErrorSev:
			errs = append(errs, m) // with the file, unlike res.Errors
		case m.Severity == support.WarningSev:
			warnings = append(warnings, m.Error())
		}
	}
	if len(errs) > 0 {
		return warnings, fmt.Errorf("linting chart %s: %w", chartDir, errors.Join(errs...))
	}
	return warnings, nil
}

// modTime is the time stamp of every file in a packaged chart, so that the
// same sources always give the same bytes (1980-01-01, as zip-era tools
// and reproducible-builds practice use when there is no source date).
var modTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Package writes <outDir>/<name>-<version>.tgz with Chart.yaml's version and
// appVersion replaced, and returns its path. The archive is reproducible:
// files in sorted order, fixed time stamps, owners and modes, and no time in
// the gzip header. Files excluded by .helmignore are left out, as by 'helm
// package'.
func Package(chartDir, version, appVersion, outDir string) (string, error) {
	if version == "" || appVersion == "" {
		return "", errors.New("packaging chart: version and appVersion must not be empty")
	}
	ch, err := load(chartDir)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = version
	ch.Metadata.AppVersion = appVersion
	// Validate checks the version is SemVer, as helm's own packager does.
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("packaging chart %s: %w", chartDir, err)
	}
	if len(ch.Dependencies()) > 0 {
		return "", fmt.Errorf("packaging chart %s: subcharts are not supported", chartDir)
	}
	chartYAML, err := yaml.Marshal(ch.Metadata)
	if err != nil {
		return "", fmt.Errorf("packaging chart %s: %w", chartDir, err)
	}

	// Every file of the chart as loaded (so .helmignore applies; Raw holds
	// them all), with Chart.yaml replaced by the edited metadata.
	files := map[string][]byte{}
	for _, f := range ch.Raw {
		files[f.Name] = f.Data
	}
	files[chartutil.ChartfileName] = chartYAML
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	// Chart.yaml first, as helm writes it; then the rest sorted.
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == chartutil.ChartfileName) != (names[j] == chartutil.ChartfileName) {
			return names[i] == chartutil.ChartfileName
		}
		return names[i] < names[j]
	})

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("packaging chart: %w", err)
	}
	out := filepath.Join(outDir, fmt.Sprintf("%s-%s.tgz", ch.Name(), version))
	var buf bytes.Buffer
	if err := writeArchive(&buf, ch.Name(), names, files); err != nil {
		return "", fmt.Errorf("packaging chart %s: %w", chartDir, err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("packaging chart: %w", err)
	}
	return out, nil
}

// writeArchive writes the layout helm's loader expects: every file under a
// top directory named after the chart.
func writeArchive(w io.Writer, chartName string, names []string, files map[string][]byte) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	// A zero ModTime keeps the time out of the gzip header.
	tw := tar.NewWriter(zw)
	for _, n := range names {
		data := files[n]
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     path.Join(chartName, filepath.ToSlash(n)),
			Mode:     0o644,
			Size:     int64(len(data)),
			ModTime:  modTime,
		}
		if !strings.HasPrefix(path.Clean(h.Name), chartName+"/") {
			return fmt.Errorf("file name %q leaves the chart directory", n)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// load reads a chart directory and checks it is one.
func load(chartDir string) (*chartv2.Chart, error) {
	st, err := os.Stat(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("loading chart: %s is not a directory", chartDir)
	}
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	return ch, nil
}

// copyValues gives helm its own deep copy, so that callers may reuse their
// maps whatever helm does with them.
func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}
	return out
}

func copyValue(x any) any {
	switch x := x.(type) {
	case map[string]any:
		return copyValues(x)
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = copyValue(e)
		}
		return c
	default:
		return x
	}
}
