package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serverstorage "k8s.io/apiserver/pkg/server/storage"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// defaultStorageMediaType is how JobSets are written to etcd unless
// --storage-media-type says otherwise: protobuf, as kube-apiserver stores
// its built-in types.
const defaultStorageMediaType = runtime.ContentTypeProtobuf

// applyStorageMediaType sets the storage codec from --storage-media-type.
// The generic options take the flag but leave the codec they were given
// (JSON) in place; this codec writes in the chosen media type and reads
// JSON, YAML and protobuf alike, so data written with another media type
// stays readable and is rewritten in the new one on its next update.
func (o *Options) applyStorageMediaType() error {
	etcd := o.Recommended.Etcd
	if etcd == nil {
		return nil
	}
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  etcd.DefaultStorageMediaType,
		StorageSerializer: Codecs,
		StorageVersion:    v1alpha2.SchemeGroupVersion,
		MemoryVersion:     schema.GroupVersion{Group: v1alpha2.GroupName, Version: runtime.APIVersionInternal},
	})
	if err != nil {
		return fmt.Errorf("--storage-media-type: %w", err)
	}
	etcd.StorageConfig.Codec = codec
	etcd.StorageConfig.EncodeVersioner = versioner
	return nil
}
