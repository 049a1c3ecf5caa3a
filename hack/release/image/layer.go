package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symlink of a layer. Exactly one of data
// and path is used for a regular file; path is read when the layer is
// written. An entry with link set is a symlink to it.
type entry struct {
	name     string // relative, no leading slash; directories end in "/"
	mode     int64  // permission bits, with c_ISVTX (01000) for sticky
	uid, gid int
	data     []byte
	path     string
	link     string
}

// writeLayer writes entries as a gzipped tar that depends only on its
// input: entries sorted by name (parents first), every time set to
// mtime, no user or group names, no extended attributes, and a gzip
// header without name or time.
func writeLayer(w io.Writer, entries []entry, mtime time.Time) error {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, e := range sorted {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		var body io.Reader
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		case e.name[len(e.name)-1] == '/':
			h.Typeflag = tar.TypeDir
		case e.path != "":
			f, err := os.Open(e.path)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			h.Typeflag, h.Size, body = tar.TypeReg, st.Size(), f
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.data)), bytes.NewReader(e.data)
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if body != nil {
			if n, err := io.Copy(tw, body); err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			} else if n != h.Size {
				return fmt.Errorf("%s changed size while being read (%d of %d bytes)", e.name, n, h.Size)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// newLayer returns the layer of entries. The gzipped bytes are made here
// (not by go-containerregistry, which would compress on every read) so
// that the layer's digest is fixed once.
func newLayer(entries []entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeLayer(&buf, entries, mtime); err != nil {
		return nil, err
	}
	gz := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
