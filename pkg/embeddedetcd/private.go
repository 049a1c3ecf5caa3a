package embeddedetcd

import (
	"fmt"
	"net/url"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/embed"
)

// socketName is the embedded etcd's client socket inside its data
// directory, which is created with mode 0700: only the server's own user can
// connect, and nothing listens on the network.
const socketName = "etcd.sock"

// peerSocketName is where the member listens for peers it never has.
const peerSocketName = "peer.sock"

// maxSocketPath is the longest path a unix socket address may have on Linux
// (sun_path holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// clientURL is the unix socket in dir, or a loopback TCP address when port
// is positive.
func clientURL(dir string, port int) (url.URL, error) {
	if port > 0 {
		return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}, nil
	}
	path := filepath.Join(dir, socketName)
	if len(path) > maxSocketPath {
		return url.URL{}, fmt.Errorf("the embedded etcd's socket path %s is longer than %d bytes: use a shorter data directory, or a loopback port", path, maxSocketPath)
	}
	return url.URL{Scheme: "unix", Path: path}, nil
}

// keepPrivate turns off what etcd offers to browsers and other HTTP clients,
// so that a web page (through DNS rebinding or a cross-origin request) can
// read nothing even when the client listener is a loopback TCP port:
// no JSON gateway to the key-value API, no CORS headers for any origin, and
// only loopback names accepted in the Host header.
func keepPrivate(ec *embed.Config) {
	ec.EnableGRPCGateway = false
	// An empty set means "every origin" to etcd; a name that no browser
	// sends as an origin allows none.
	ec.CORS = map[string]struct{}{"jobset-apiserver.invalid": {}}
	ec.HostWhitelist = map[string]struct{}{"localhost": {}, "127.0.0.1": {}, "::1": {}}
}
