package image

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push pushes the image index of the OCI layout in layoutDir (as Build
// writes it: one index) to ref, with credentials from the default
// keychain (docker's config.json and credential helpers). It returns ref
// by digest. opts come after the defaults, so they may override them.
func Push(ctx context.Context, layoutDir, ref string, opts ...remote.Option) (name.Digest, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reference %q: %w", ref, err)
	}
	top, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading the OCI layout %s: %w", layoutDir, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return name.Digest{}, err
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return name.Digest{}, fmt.Errorf("the OCI layout %s holds %d entries; want exactly one image index", layoutDir, len(im.Manifests))
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		return name.Digest{}, err
	}
	all := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(tag, idx, all...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return tag.Context().Digest(im.Manifests[0].Digest.String()), nil
}

// PushAll pushes every image of the images.json in dir to
// <registry>/<name>:<version>. A non-empty version must match the one the
// images were built for, so that stale output is not pushed under a new
// tag.
func PushAll(ctx context.Context, dir, registry, version string, opts ...remote.Option) ([]name.Digest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if version != "" && version != m.Version {
		return nil, fmt.Errorf("the images in %s were built for version %s, not %s; run 'make images' again", dir, m.Version, version)
	}
	if registry == "" {
		return nil, fmt.Errorf("no registry to push to")
	}
	var pushed []name.Digest
	for _, img := range m.Images {
		d, err := Push(ctx, filepath.Join(dir, filepath.FromSlash(img.Layout)), registry+"/"+img.Name+":"+m.Version, opts...)
		if err != nil {
			return pushed, err
		}
		if d.DigestStr() != img.IndexDigest {
			return pushed, fmt.Errorf("%s: the layout holds %s, images.json says %s", img.Name, d.DigestStr(), img.IndexDigest)
		}
		pushed = append(pushed, d)
	}
	return pushed, nil
}
