package main

import (
	"io"
	"strings"
	"testing"
)

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--extra-child-resources=workloads"}, "is not <resource>.<version>.<group>"},
		{[]string{"--backup-dir=x", "stray"}, "unexpected arguments"},
		{[]string{"--ca-bundle-file=/nonexistent/ca.crt"}, "no such file"},
		{[]string{"--no-such-flag"}, "unknown flag"},
	} {
		err := run(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
