package apiserver

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/admission"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/nativejobset/jobset/pkg/admission/quota"
	"github.com/nativejobset/jobset/pkg/admission/volumeclaims"
	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/embeddedetcd"
	generatedopenapi "github.com/nativejobset/jobset/pkg/generated/openapi"
	"github.com/nativejobset/jobset/pkg/version"
)

const etcdPathPrefix = "/registry/jobset.x-k8s.io"

// Options are the command-line options of jobset-apiserver: the standard
// options of an aggregated API server plus the embedded etcd.
type Options struct {
	Recommended *genericoptions.RecommendedOptions
	// ServerRun holds the request timeout, body limit and shutdown settings.
	ServerRun *RunOptions

	// EmbeddedEtcdDir is where the embedded etcd keeps its data when no
	// --etcd-servers are given.
	EmbeddedEtcdDir string
	// EmbeddedEtcdClientPort, when positive, is a loopback TCP port for the
	// embedded etcd instead of its unix socket.
	EmbeddedEtcdClientPort int
	// EmbeddedEtcdMaxRequestBytes is the largest write the embedded etcd
	// accepts, which bounds the size of a stored JobSet.
	EmbeddedEtcdMaxRequestBytes int64
	// EmbeddedEtcdQuotaBackendBytes is the size the embedded etcd's database
	// may reach before it raises its NOSPACE alarm and refuses writes; 0
	// sizes it from MemoryLimit (DefaultQuotaFor).
	EmbeddedEtcdQuotaBackendBytes int64
	// MemoryLimit is the container's memory limit in bytes (0: none), read
	// by the command from its cgroup.
	MemoryLimit int64
	// EmbeddedEtcdMaintenanceInterval is how often the embedded etcd's
	// database is checked for defragmentation and a NOSPACE alarm.
	EmbeddedEtcdMaintenanceInterval time.Duration
	// EmbeddedEtcdUnsafeNoFsync turns off the embedded etcd's fsync, for
	// test clusters whose etcd runs the same way.
	EmbeddedEtcdUnsafeNoFsync bool

	embeddedEtcd *embeddedetcd.Server
	// nospaceEvents reports the embedded etcd's NOSPACE alarm as Events.
	nospaceEvents *nospaceEvents
	// standalone is set when no Kubernetes API is reachable: the server then
	// runs without admission plugins and priority and fairness.
	standalone bool

	Out, ErrOut io.Writer
}

// NewOptions returns the options with their defaults.
func NewOptions(out, errOut io.Writer) *Options {
	o := &Options{
		Recommended: genericoptions.NewRecommendedOptions(
			etcdPathPrefix,
			Codecs.LegacyCodec(v1alpha2.SchemeGroupVersion),
		),
		ServerRun:                       NewRunOptions(),
		EmbeddedEtcdDir:                 "/var/lib/jobset-apiserver/etcd",
		EmbeddedEtcdMaxRequestBytes:     embeddedetcd.DefaultMaxRequestBytes,
		EmbeddedEtcdMaintenanceInterval: time.Minute,
		Out:                             out,
		ErrOut:                          errOut,
	}
	o.Recommended.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		v1alpha2.SchemeGroupVersion, schema.GroupKind{Group: v1alpha2.GroupName})
	o.Recommended.Etcd.DefaultStorageMediaType = defaultStorageMediaType
	// Our own admission: existing claims of volumeClaimPolicies. Then the
	// cluster's ResourceQuotas, last as in kube-apiserver, so that only a
	// request every other plugin admitted is charged to a quota.
	volumeclaims.Register(o.Recommended.Admission.Plugins)
	quota.Register(o.Recommended.Admission.Plugins)
	o.Recommended.Admission.RecommendedPluginOrder = append(o.Recommended.Admission.RecommendedPluginOrder,
		volumeclaims.PluginName, quota.PluginName)
	// Without a kubeconfig the server still runs, authenticating client
	// certificates only and authorizing system:masters only.
	o.Recommended.Authentication.RemoteKubeConfigFileOptional = true
	o.Recommended.Authorization.RemoteKubeConfigFileOptional = true
	return o
}

// AddFlags registers every option on the flag set.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Recommended.AddFlags(fs)
	o.ServerRun.AddFlags(fs)
	fs.StringVar(&o.EmbeddedEtcdDir, "embedded-etcd-dir", o.EmbeddedEtcdDir,
		"Data directory of the embedded etcd, started on 127.0.0.1 when --etcd-servers is empty. Its data is kept across restarts.")
	fs.IntVar(&o.EmbeddedEtcdClientPort, "embedded-etcd-client-port", o.EmbeddedEtcdClientPort,
		"A loopback TCP port for the embedded etcd's clients (for etcdctl while debugging). 0, the default, serves them only on the unix socket etcd.sock in --embedded-etcd-dir.")
	fs.Int64Var(&o.EmbeddedEtcdMaxRequestBytes, "embedded-etcd-max-request-bytes", o.EmbeddedEtcdMaxRequestBytes,
		"The largest write the embedded etcd accepts, which bounds a stored JobSet (with its metadata and defaults); larger ones get 413. The server's etcd client sends at most 2 MiB whatever this says.")
	fs.Int64Var(&o.EmbeddedEtcdQuotaBackendBytes, "embedded-etcd-quota-backend-bytes", o.EmbeddedEtcdQuotaBackendBytes,
		"The size the embedded etcd's database may reach. Beyond it etcd raises its NOSPACE alarm and refuses writes (507; reads and deletes still work and /readyz stays ready) until enough is deleted; the alarm then clears by itself; both are logged, in the metric jobset_apiserver_embedded_etcd_nospace_alarm and in Events on the APIService v1alpha2.jobset.x-k8s.io. "+
			"0, the default, sizes it to the container's memory limit: a sixteenth of what is left after 128 MiB for the server itself (every JobSet stored is also held decoded in the watch cache, about ten times its size in etcd), between 8 MiB and 2 GiB; 2 GiB without a limit.")
	fs.DurationVar(&o.EmbeddedEtcdMaintenanceInterval, "embedded-etcd-maintenance-interval", o.EmbeddedEtcdMaintenanceInterval,
		"How often the embedded etcd's database size is recorded, the database defragmented when at least half of it is free (and at least 64 MiB; at most once every 30 minutes, as a defragmentation stalls all JobSet reads and writes while it runs), and a NOSPACE alarm disarmed once the data in use is under half the quota.")
	fs.BoolVar(&o.EmbeddedEtcdUnsafeNoFsync, "embedded-etcd-unsafe-no-fsync", o.EmbeddedEtcdUnsafeNoFsync,
		"Unsafe: the embedded etcd does not fsync its writes (etcd's --unsafe-no-fsync), so a crash of the machine can lose acknowledged writes. For test clusters whose own etcd runs the same way.")
}

// Complete fills in what depends on other options and on the environment.
// It starts the embedded etcd when no etcd servers were given.
func (o *Options) Complete() error {
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if o.Recommended.CoreAPI != nil && o.Recommended.CoreAPI.CoreAPIKubeconfigPath == "" && !inCluster {
		klog.Warning("No --kubeconfig and not in a cluster: running standalone, without admission webhooks, admission policies, resource quota and priority and fairness")
		o.standalone = true
		o.Recommended.CoreAPI = nil
		o.Recommended.Admission = nil
		o.Recommended.Features.EnablePriorityAndFairness = false
	}
	if o.EmbeddedEtcdQuotaBackendBytes == 0 {
		o.EmbeddedEtcdQuotaBackendBytes = DefaultQuotaFor(o.MemoryLimit)
	}
	if len(o.Recommended.Etcd.StorageConfig.Transport.ServerList) == 0 {
		// Bad embedded etcd options are refused before the etcd starts on
		// (and possibly creates) its data directory.
		if errs := o.embeddedEtcdErrors(); len(errs) > 0 {
			return utilerrors.NewAggregate(errs)
		}
		klog.InfoS("Embedded etcd quota", "bytes", o.EmbeddedEtcdQuotaBackendBytes, "memoryLimit", o.MemoryLimit)
		o.nospaceEvents = newNospaceEvents()
		srv, err := embeddedetcd.Start(embeddedetcd.Config{
			Dir:                 o.EmbeddedEtcdDir,
			ClientPort:          o.EmbeddedEtcdClientPort,
			MaxRequestBytes:     o.EmbeddedEtcdMaxRequestBytes,
			QuotaBackendBytes:   o.EmbeddedEtcdQuotaBackendBytes,
			MaintenanceInterval: o.EmbeddedEtcdMaintenanceInterval,
			UnsafeNoFsync:       o.EmbeddedEtcdUnsafeNoFsync,
			OnAlarmChange:       o.nospaceEvents.alarmChanged,
		})
		if err != nil {
			return err
		}
		o.embeddedEtcd = srv
		o.Recommended.Etcd.StorageConfig.Transport.ServerList = []string{srv.ClientURL}
	}
	return nil
}

// Sizing of the embedded etcd's default quota from the memory limit.
const (
	// quotaShareOfMemory: every stored JobSet is also held decoded in the
	// watch cache, which takes about ten times its size in etcd (about 80
	// MiB of RSS against 8 MiB of database per 1,000 JobSets in
	// test/bench); a sixteenth of the memory left keeps a database full of
	// live JobSets, with room for its history, within the limit.
	quotaShareOfMemory = 16
	// serverBaseMemory is what the server takes with no JobSets, rounded up.
	serverBaseMemory = 128 << 20
	minDefaultQuota  = 8 << 20
)

// DefaultQuotaFor is the embedded etcd's quota for a container with the
// given memory limit (0: none).
func DefaultQuotaFor(memoryLimit int64) int64 {
	if memoryLimit <= 0 {
		return embeddedetcd.DefaultQuotaBackendBytes
	}
	return min(max((memoryLimit-serverBaseMemory)/quotaShareOfMemory, minDefaultQuota), embeddedetcd.DefaultQuotaBackendBytes)
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.Recommended.Validate()...)
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.embeddedEtcdErrors()...)
	return utilerrors.NewAggregate(errs)
}

// embeddedEtcdErrors reports every invalid embedded etcd option.
func (o *Options) embeddedEtcdErrors() []error {
	var errs []error
	if o.EmbeddedEtcdClientPort < 0 || o.EmbeddedEtcdClientPort > 65535 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-client-port must be between 0 and 65535"))
	}
	if o.EmbeddedEtcdMaxRequestBytes < 1024 || o.EmbeddedEtcdMaxRequestBytes > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-max-request-bytes must be between 1024 and %d", uint32(math.MaxUint32)))
	}
	if o.EmbeddedEtcdQuotaBackendBytes < 0 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-quota-backend-bytes must not be negative"))
	}
	if o.EmbeddedEtcdMaintenanceInterval <= 0 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-maintenance-interval must be positive"))
	}
	return errs
}

// Config turns the options into a server configuration.
func (o *Options) Config() (*Config, error) {
	if err := o.Recommended.SecureServing.MaybeDefaultWithSelfSignedCerts(
		"localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}

	o.Recommended.ExtraAdmissionInitializers = admissionInitializers

	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.EffectiveVersion = servedVersion{EffectiveVersion: compatibility.DefaultBuildEffectiveVersion(), build: version.Get()}
	cfg.FeatureGate = utilfeature.DefaultFeatureGate

	namer := openapi.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "JobSet"
	cfg.OpenAPIConfig.Info.Version = v1alpha2.SchemeGroupVersion.Version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "JobSet"
	cfg.OpenAPIV3Config.Info.Version = v1alpha2.SchemeGroupVersion.Version

	if err := o.applyStorageMediaType(); err != nil {
		return nil, err
	}
	if err := o.Recommended.ApplyTo(cfg); err != nil {
		return nil, err
	}
	o.ServerRun.ApplyTo(&cfg.Config)
	c := &Config{GenericConfig: cfg, Standalone: o.standalone}
	if o.embeddedEtcd != nil {
		c.StorageRequestLimit = o.EmbeddedEtcdMaxRequestBytes
		// NOSPACE is not a readiness failure: reads and the deletes that
		// free space must still be routed here.
		c.OnStorageFull = o.embeddedEtcd.NoticeNospace
		// Standalone, the alarm is only logged and exported as a metric.
		if cfg.ClientConfig != nil {
			if err := o.addNospaceEventsHook(cfg); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// addNospaceEventsHook records the embedded etcd's NOSPACE alarm as Events
// in the cluster once the server runs, until it stops.
func (o *Options) addNospaceEventsHook(cfg *genericapiserver.RecommendedConfig) error {
	kube, err := kubernetes.NewForConfig(cfg.ClientConfig)
	if err != nil {
		return fmt.Errorf("creating the client for NOSPACE events: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg.ClientConfig)
	if err != nil {
		return fmt.Errorf("creating the client for NOSPACE events: %w", err)
	}
	events := o.nospaceEvents
	return cfg.AddPostStartHook("jobset-nospace-events", func(ctx genericapiserver.PostStartHookContext) error {
		events.start(ctx, kube, meta)
		return nil
	})
}

// admissionInitializers are the initializers our admission plugins need
// beyond the generic ones: webhook services resolved as kube-apiserver
// resolves them, and what ResourceQuota counts.
func admissionInitializers(c *genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
	if c.SharedInformerFactory == nil {
		return nil, nil
	}
	var client kubernetes.Interface
	if c.ClientConfig != nil {
		kube, err := kubernetes.NewForConfig(c.ClientConfig)
		if err != nil {
			return nil, fmt.Errorf("creating the client for webhook services: %w", err)
		}
		client = kube
	}
	resolver := newServiceResolver(client)
	err := c.AddPostStartHook("jobset-webhook-services", func(ctx genericapiserver.PostStartHookContext) error {
		context.AfterFunc(ctx, resolver.Stop)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []admission.PluginInitializer{
		webhookinit.NewPluginInitializer(nil, resolver),
		quota.NewInitializer(),
	}, nil
}

// StopEmbeddedEtcd stops the embedded etcd, if one was started.
func (o *Options) StopEmbeddedEtcd() {
	o.embeddedEtcd.Stop()
	o.embeddedEtcd = nil
}

// Run serves until ctx ends, then stops the embedded etcd.
func (o *Options) Run(ctx context.Context) error {
	defer o.StopEmbeddedEtcd()
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	srv, err := cfg.Complete().New()
	if err != nil {
		return err
	}
	return srv.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
