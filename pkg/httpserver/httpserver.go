// Package httpserver builds the HTTP servers the binaries run themselves
// (metrics, health, the in-place agent's probe) with every limit set, and
// serves them until their context ends. Without the limits a client could
// hold connections open forever or send 1 MiB of headers.
package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Limits of every server.
const (
	// MaxHeaderBytes is far above any legitimate request's headers (a
	// scrape with the largest bearer token the HTTPS metrics endpoint
	// accepts); Go's default is 1 MiB.
	MaxHeaderBytes = 16 << 10
	// ReadHeaderTimeout and ReadTimeout bound the TLS handshake and the
	// request; no endpoint takes a body.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	// WriteTimeout bounds the handling and the response, above
	// Prometheus' default scrape timeout of 10s.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes idle keep-alive connections; it is longer than
	// Prometheus' default scrape interval of 1m so scrapes reuse them.
	IdleTimeout = 90 * time.Second
	// shutdownTimeout is what requests in flight get when the context
	// ends.
	shutdownTimeout = 2 * time.Second
)

// New returns a server of h with every limit set.
func New(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// Serve serves srv on ln, over TLS when srv.TLSConfig is set, until ctx
// ends, then shuts it down. It returns at once; name says which server
// stopped in the log.
func Serve(ctx context.Context, name string, srv *http.Server, ln net.Listener) {
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "server", name)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
}
