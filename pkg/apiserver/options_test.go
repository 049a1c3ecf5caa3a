package apiserver

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Bad embedded etcd flags are refused by Complete, before the embedded
// etcd starts, so that nothing is created in its data directory.
func TestCompleteRefusesBadEmbeddedEtcdFlagsBeforeStarting(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
	}{
		{"--embedded-etcd-quota-backend-bytes=-1", "--embedded-etcd-quota-backend-bytes must not be negative"},
		{"--embedded-etcd-client-port=70000", "--embedded-etcd-client-port must be between 0 and 65535"},
		{"--embedded-etcd-max-request-bytes=10", "--embedded-etcd-max-request-bytes must be between 1024"},
		{"--embedded-etcd-maintenance-interval=0s", "--embedded-etcd-maintenance-interval must be positive"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "etcd")
			o := NewOptions(io.Discard, io.Discard)
			fs := pflag.NewFlagSet("jobset-apiserver", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse([]string{"--embedded-etcd-dir=" + dir, tc.flag}); err != nil {
				t.Fatal(err)
			}
			err := o.Complete()
			if o.embeddedEtcd != nil {
				o.embeddedEtcd.Stop()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Complete = %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the embedded etcd's directory exists after the refusal (%v)", err)
			}
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
