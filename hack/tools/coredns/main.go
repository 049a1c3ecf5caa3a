// Command coredns is CoreDNS built with only the plugins the local cluster's
// real node uses (hack/tools/localtool/node's Corefile), which links a small
// part of what the full CoreDNS does: its cloud-provider plugins alone cost
// most of a full build. CoreDNS supports this as a library: the directives
// below replace its full list, in the order of its plugin.cfg.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "prometheus", "errors", "cache", "template", "kubernetes"}
}

func main() {
	coremain.Run()
}
