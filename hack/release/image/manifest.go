package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ManifestFile is the name of the Manifest in the output directory.
const ManifestFile = "images.json"

// Manifest is images.json, the record of one 'make images' run that later
// steps (push, SBOMs, the release bundle) read instead of rebuilding or
// guessing names. Paths are relative to the directory holding
// images.json, with forward slashes, so that the file is the same for
// every checkout of a commit. Fields are only ever added.
type Manifest struct {
	// Version is the tag of every image, e.g. "v0.1.0".
	Version string `json:"version"`
	// Commit is the full VCS revision the images were built from.
	Commit string `json:"commit"`
	// Created is the commit time, used for every timestamp in the images.
	Created time.Time `json:"created"`
	// Repository is the prefix of the references, e.g. "ghcr.io/nativejobset".
	Repository string  `json:"repository"`
	Images     []Image `json:"images"`
}

// Image is one multi-platform image.
type Image struct {
	// Name is the binary and the image's name, e.g. "jobset-controller".
	Name string `json:"name"`
	// Reference is "<repository>/<name>:<version>".
	Reference string `json:"reference"`
	// Layout is the OCI image layout directory holding the index.
	Layout string `json:"layout"`
	// IndexDigest is the digest of the image index ("sha256:…"), the
	// digest a registry reports for Reference once pushed.
	IndexDigest string     `json:"indexDigest"`
	Platforms   []Platform `json:"platforms"`
}

// Platform is the image of one platform within an Image.
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	// ManifestDigest is the digest of the platform's OCI image manifest.
	ManifestDigest string `json:"manifestDigest"`
	// ConfigDigest is the digest of the image configuration, the image ID
	// that 'docker images' and 'docker load' show.
	ConfigDigest string `json:"configDigest"`
	// Archive is a tarball for 'docker load' and 'ctr images import',
	// tagged Reference.
	Archive string `json:"archive"`
	// Binary is the Go binary in the image (at /<name>), as built.
	Binary string `json:"binary"`
}

// String is the platform as "os/arch".
func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// ReadManifest reads images.json from dir.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("reading the images' manifest (built by 'make images'): %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}

// write writes m as images.json into dir.
func (m *Manifest) write(dir string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644)
}
