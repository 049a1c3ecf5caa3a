package image

import (
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonrootUID is the user and group the images run as: nonroot, as in
// distroless images, so that policies written for those apply.
const NonrootUID = 65532

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// CABundlePath is where Go's crypto/x509 looks first on Linux.
const CABundlePath = "etc/ssl/certs/ca-certificates.crt"

// caBundle is the Mozilla root store pinned by hack/release's go.mod
// (golang.org/x/crypto/x509roots/fallback), as PEM. Roots that carry a
// constraint (a distrust-after date) are left out: a PEM file cannot
// express the constraint, and trusting them without it would be wider
// than the store says.
func caBundle() ([]byte, error) {
	var out []byte
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})...)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the fallback root bundle has no unconstrained roots")
	}
	return out, nil
}

// baseEntries is the filesystem every image shares: no shell, no package
// manager, just what a static Go binary needs to run as nonroot and talk
// TLS.
func baseEntries() ([]entry, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CABundlePath, mode: 0o644, data: certs},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonrootUID, gid: NonrootUID},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
	}, nil
}
