package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

type fixedUser struct{ name string }

func (f fixedUser) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{Name: f.name}}, true, nil
}

func TestRejectAnonymous(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	if _, ok, _ := (rejectAnonymous{fixedUser{user.Anonymous}}).AuthenticateRequest(req); ok {
		t.Error("an anonymous request was authenticated")
	}
	resp, ok, _ := (rejectAnonymous{fixedUser{"system:serviceaccount:ns:scraper"}}).AuthenticateRequest(req)
	if !ok || resp.User.GetName() != "system:serviceaccount:ns:scraper" {
		t.Errorf("a real user was refused: %v %v", ok, resp)
	}
}

func TestSecureMetricsFlags(t *testing.T) {
	o := defaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--secure-metrics-bind-address=127.0.0.1:8443", "--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--secure-metrics-bind-address=localhost:8443"}, "not an IP address"},
		{[]string{"--secure-metrics-bind-address=127.0.0.1"}, "--secure-metrics-bind-address"},
		{[]string{"--secure-metrics-bind-address=127.0.0.1:99999"}, "invalid port"},
		{[]string{"--secure-metrics-bind-address=:8443", "--tls-cert-file=/c.crt"}, "go together"},
	} {
		o := defaultOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	// Off by default.
	if d := defaultOptions(); d.secureMetrics.bindAddress != "" {
		t.Errorf("secure metrics on by default at %q", d.secureMetrics.bindAddress)
	}
}
