package pki

import (
	"strings"
	"testing"
)

func TestKubeconfigNamesItsFiles(t *testing.T) {
	kc := string(Kubeconfig("https://127.0.0.1:1", "/p/ca.crt", "/p/u.crt", "/p/u.key", "someone"))
	for _, want := range []string{"server: https://127.0.0.1:1\n", "certificate-authority: /p/ca.crt\n",
		"client-certificate: /p/u.crt\n", "client-key: /p/u.key\n", "- name: someone\n", "user: someone\n"} {
		if !strings.Contains(kc, want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
		}
	}
}
