package apiserver

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// RunOptions are the request and shutdown settings kube-apiserver exposes as
// server-run flags. The defaults differ from kube-apiserver's so that a
// SIGTERM ends open watches at once instead of waiting for the request
// timeout, and the pod's grace period is not spent before the embedded etcd
// could close its data directory.
type RunOptions struct {
	RequestTimeout                      time.Duration
	ShutdownDelayDuration               time.Duration
	ShutdownWatchTerminationGracePeriod time.Duration
	ShutdownSendRetryAfter              bool
	MaxRequestBodyBytes                 int64
}

// Defaults of RunOptions (see the flags' help and docs/operations/reliability.md).
const (
	DefaultRequestTimeout                      = 60 * time.Second
	DefaultShutdownDelayDuration               = 2 * time.Second
	DefaultShutdownWatchTerminationGracePeriod = 2 * time.Second
	// DefaultMaxRequestBodyBytes is kube-apiserver's limit: JSON and YAML
	// bodies are larger than the compact form that is stored.
	DefaultMaxRequestBodyBytes = 3 * 1024 * 1024
)

// NewRunOptions returns the defaults.
func NewRunOptions() *RunOptions {
	return &RunOptions{
		RequestTimeout:                      DefaultRequestTimeout,
		ShutdownDelayDuration:               DefaultShutdownDelayDuration,
		ShutdownWatchTerminationGracePeriod: DefaultShutdownWatchTerminationGracePeriod,
		ShutdownSendRetryAfter:              true,
		MaxRequestBodyBytes:                 DefaultMaxRequestBodyBytes,
	}
}

// AddFlags registers the flags under kube-apiserver's names.
func (o *RunOptions) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout,
		"How long a non-watch request may run before the server times it out; also bounds how long shutdown waits for such requests.")
	fs.DurationVar(&o.ShutdownDelayDuration, "shutdown-delay-duration", o.ShutdownDelayDuration,
		"After SIGTERM, how long /readyz fails while requests are still served, so that load balancers and the APIService stop routing here first.")
	fs.DurationVar(&o.ShutdownWatchTerminationGracePeriod, "shutdown-watch-termination-grace-period", o.ShutdownWatchTerminationGracePeriod,
		"After the shutdown delay, how long the server waits for open watches to end (they are told to end at once, paced so that clients reconnect gradually); 0 does not end watches, and shutdown then waits up to --request-timeout for them.")
	fs.BoolVar(&o.ShutdownSendRetryAfter, "shutdown-send-retry-after", o.ShutdownSendRetryAfter,
		"After the shutdown delay, answer new requests with 429 and Retry-After (which clients retry) until in-flight requests have drained, instead of closing the listener.")
	fs.Int64Var(&o.MaxRequestBodyBytes, "max-request-body-bytes", o.MaxRequestBodyBytes,
		"The largest request body accepted for a write, in bytes; larger bodies get 413. 0 means no limit.")
}

// Validate reports invalid values.
func (o *RunOptions) Validate() []error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"--request-timeout":                         o.RequestTimeout,
		"--shutdown-delay-duration":                 o.ShutdownDelayDuration,
		"--shutdown-watch-termination-grace-period": o.ShutdownWatchTerminationGracePeriod,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	if o.RequestTimeout == 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be positive"))
	}
	if o.MaxRequestBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-request-body-bytes must not be negative"))
	}
	return errs
}

// ApplyTo sets the values on the generic server configuration.
func (o *RunOptions) ApplyTo(c *genericapiserver.Config) {
	c.RequestTimeout = o.RequestTimeout
	c.ShutdownDelayDuration = o.ShutdownDelayDuration
	c.ShutdownWatchTerminationGracePeriod = o.ShutdownWatchTerminationGracePeriod
	c.ShutdownSendRetryAfter = o.ShutdownSendRetryAfter
	c.MaxRequestBodyBytes = o.MaxRequestBodyBytes
}
