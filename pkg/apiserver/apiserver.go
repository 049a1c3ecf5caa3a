// Package apiserver assembles the JobSet API server: options become a
// config, the config is completed, and the completed config builds a
// server with the jobsets storage installed.
package apiserver

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	jobsetstorage "github.com/nativejobset/jobset/pkg/registry/jobset"
	replicatedjobstorage "github.com/nativejobset/jobset/pkg/registry/replicatedjob"
)

// Config is the server's configuration before completion.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	// StorageRequestLimit is etcd's request size limit when known (the
	// embedded etcd's), named in the 413 for JobSets too large to store.
	StorageRequestLimit int64
	// Standalone is set when no Kubernetes cluster is behind the server.
	Standalone bool
	// OnStorageFull, when set, is called when etcd refuses a write for
	// lack of space (the embedded etcd's maintenance then reports it).
	OnStorageFull func()
}

// CompletedConfig is a Config with every default filled in.
type CompletedConfig struct {
	GenericConfig       genericapiserver.CompletedConfig
	StorageRequestLimit int64
	Standalone          bool
	OnStorageFull       func()
}

// Server is a JobSet API server ready to run.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of the generic configuration.
func (c *Config) Complete() CompletedConfig {
	return CompletedConfig{GenericConfig: c.GenericConfig.Complete(), StorageRequestLimit: c.StorageRequestLimit, Standalone: c.Standalone,
		OnStorageFull: c.OnStorageFull}
}

// New builds the server and installs the jobset.x-k8s.io group.
func (c CompletedConfig) New() (*Server, error) {
	generic, err := c.GenericConfig.New("jobset-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(jobset.GroupName, Scheme, metav1.ParameterCodec, Codecs)

	restOptions := sizeLimitedRESTOptions{RESTOptionsGetter: c.GenericConfig.RESTOptionsGetter, limit: c.StorageRequestLimit, onNoSpace: c.OnStorageFull}
	jobsets, err := jobsetstorage.NewStorage(Scheme, restOptions)
	if err != nil {
		return nil, fmt.Errorf("creating jobsets storage: %w", err)
	}
	// replicatedjobs stores nothing: it projects JobSets, and its scale
	// writes go through the JobSet store and strategy.
	replicatedJobs := replicatedjobstorage.NewStorage(jobsets.JobSet.Store)
	var jobsetsREST rest.Storage = jobsets.JobSet
	if c.Standalone {
		jobsetsREST = standaloneJobSets{jobsets.JobSet}
	}
	group.VersionedResourcesStorageMap[v1alpha2.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"jobsets":              jobsetsREST,
		"jobsets/status":       jobsets.Status,
		"replicatedjobs":       replicatedJobs.ReplicatedJob,
		"replicatedjobs/scale": replicatedJobs.Scale,
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: generic}, nil
}
