// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/nativejobset/jobset/pkg/apis/jobset
// +k8s:defaulter-gen=TypeMeta
// +groupName=jobset.x-k8s.io
// +k8s:openapi-model-package=io.x-k8s.jobset.v1alpha2

// Package v1alpha2 is the v1alpha2 version of the JobSet API, wire-compatible
// with upstream JobSet v1alpha2.
package v1alpha2
