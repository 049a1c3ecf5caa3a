// +k8s:deepcopy-gen=package
// +groupName=jobset.x-k8s.io

// Package jobset holds the internal (hub) form of the JobSet API. Every
// served version converts to and from these types; validation and the
// registry work on them only.
package jobset
