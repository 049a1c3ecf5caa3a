package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// serverBinary is where the images of 'make images' put the server.
const serverBinary = "/jobset-apiserver"

// podTarget is the jobset-apiserver pod that `snapshot save --from-pod`
// reads the embedded etcd through.
type podTarget struct {
	namespace, name, container string
	kubeconfig                 string
}

// parsePod parses NAMESPACE/NAME.
func parsePod(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--from-pod=%q: want NAMESPACE/NAME, e.g. jobset-system/jobset-apiserver-0", s)
	}
	return namespace, name, nil
}

// streamFromPod runs `jobset-apiserver snapshot save -` in the server's pod
// through the pods/exec subresource and returns the snapshot as it streams.
// The pod's own save checks etcd's checksum and exits non-zero on a broken
// stream; that exit, like any failure of the exec, ends the reader with an
// error, so the caller keeps no partial file. Its messages go to stderr.
func streamFromPod(ctx context.Context, p podTarget, embeddedEtcdDir string, stderr io.Writer) (io.ReadCloser, error) {
	// An empty --kubeconfig means the pod's own ServiceAccount (in-cluster).
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client configuration: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	req := kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(p.namespace).Name(p.name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: p.container,
			Command:   []string{serverBinary, "snapshot", "save", "-", "--embedded-etcd-dir=" + embeddedEtcdDir},
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	// Servers (or proxies) without WebSocket streaming get SPDY.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, err
	}
	r, w := io.Pipe()
	go func() {
		err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: w, Stderr: stderr})
		if err != nil {
			err = fmt.Errorf("snapshot save in pod %s/%s: %w", p.namespace, p.name, err)
		}
		w.CloseWithError(err)
	}()
	return r, nil
}
