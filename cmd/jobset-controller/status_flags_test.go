package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestStatusCountersIntervalFlag(t *testing.T) {
	if d := defaultOptions(); d.statusCountersInterval != time.Second {
		t.Fatalf("default --status-counters-interval = %v, want 1s", d.statusCountersInterval)
	}
	for _, tc := range []struct {
		arg     string
		want    time.Duration
		wantErr bool
	}{
		{arg: "--status-counters-interval=250ms", want: 250 * time.Millisecond},
		{arg: "--status-counters-interval=0", want: 0},
		{arg: "--status-counters-interval=-1s", want: -time.Second, wantErr: true},
	} {
		o := defaultOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse([]string{tc.arg}); err != nil {
			t.Fatalf("%s: %v", tc.arg, err)
		}
		if o.statusCountersInterval != tc.want {
			t.Errorf("%s: interval = %v, want %v", tc.arg, o.statusCountersInterval, tc.want)
		}
		err := o.validate()
		if tc.wantErr != (err != nil) || err != nil && !strings.Contains(err.Error(), "--status-counters-interval") {
			t.Errorf("%s: validate = %v", tc.arg, err)
		}
	}
}
