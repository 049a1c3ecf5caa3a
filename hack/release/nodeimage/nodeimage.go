// Package nodeimage names the images that the local test cluster's node
// imports into containerd ('ctr -n k8s.io images import') from the
// archives that 'go run ./hack/release node-images' writes: the node can
// pull nothing, so these are its only images besides JobSet's own. The
// package holds nothing else, so that any code may import it.
package nodeimage

const (
	// Pause is the pod sandbox image, containerd's sandbox image. Its
	// entrypoint is /pause, built from hack/release/pause.
	Pause = "localhost/jobset-local/pause:v1"

	// Busybox is a busybox image for test pods: /bin/sh and the other
	// applets, PATH=/bin, default command sh.
	Busybox = "localhost/jobset-local/busybox:v1"

	// BusyboxInPlaceAgent is Busybox with /jobset-inplace-agent from
	// 'make images' added: a workload image with the agent copied in, as
	// wrapper mode needs (artifacts/inplace-agent/README.md).
	BusyboxInPlaceAgent = "localhost/jobset-local/busybox-inplace-agent:v1"
)

// Archive names, as written into the output directory.
const (
	PauseArchive   = "pause.tar"
	BusyboxArchive = "busybox.tar"
	// BusyboxInPlaceAgentArchive is written only when the images of 'make
	// images' are given.
	BusyboxInPlaceAgentArchive = "busybox-inplace-agent.tar"
)
