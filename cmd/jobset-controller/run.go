package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	jobset "github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
	"github.com/nativejobset/jobset/pkg/controller"
	versioned "github.com/nativejobset/jobset/pkg/generated/clientset/versioned"
	jsscheme "github.com/nativejobset/jobset/pkg/generated/clientset/versioned/scheme"
	"github.com/nativejobset/jobset/pkg/httpserver"
	"github.com/nativejobset/jobset/pkg/memlimit"
)

type options struct {
	kubeconfig  string
	workers     int
	qps         float32
	burst       int
	resync      time.Duration
	healthAddr  string
	parallelism int

	placementTimeout time.Duration
	// statusCountersInterval: controller.Options.StatusCountersInterval.
	statusCountersInterval time.Duration
	placementQPS           float32
	placementBurst         int

	metricsAddr       string
	metricsMaxJobSets int
	profiling         bool
	secureMetrics     *secureMetricsOptions

	leaderElect    bool
	leNamespace    string
	leName         string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	shutdownGrace  time.Duration
	apiWaitTimeout time.Duration
	contentType    string
}

func defaultOptions() *options {
	return &options{
		workers:                20,
		qps:                    500,
		burst:                  1000,
		resync:                 12 * time.Hour,
		healthAddr:             "127.0.0.1:8081",
		metricsAddr:            "127.0.0.1:8080",
		secureMetrics:          newSecureMetricsOptions(),
		parallelism:            50,
		placementTimeout:       2 * time.Minute,
		statusCountersInterval: time.Second,
		placementQPS:           100,
		placementBurst:         200,
		leaderElect:            true,
		leNamespace:            "kube-system",
		leName:                 "jobset-controller",
		leaseDuration:          15 * time.Second,
		renewDeadline:          10 * time.Second,
		retryPeriod:            2 * time.Second,
		shutdownGrace:          10 * time.Second,
		apiWaitTimeout:         0,
		contentType:            runtime.ContentTypeProtobuf,
	}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig. Empty uses the in-cluster configuration.")
	fs.IntVar(&o.workers, "workers", o.workers, "Number of JobSets reconciled concurrently.")
	fs.Float32Var(&o.qps, "kube-api-qps", o.qps, "Queries per second to the API server.")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "Burst of queries to the API server.")
	fs.StringVar(&o.contentType, "kube-api-content-type", o.contentType, "Encoding of requests to the API servers: application/vnd.kubernetes.protobuf, with JSON accepted in answers, or application/json.")
	fs.DurationVar(&o.resync, "resync-period", o.resync, "Period of the informers' full resync (0 disables it).")
	fs.StringVar(&o.healthAddr, "health-addr", o.healthAddr, "Address serving /healthz and /readyz; empty disables it.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, "Address serving Prometheus /metrics over plain HTTP (loopback by default); empty disables it.")
	fs.BoolVar(&o.profiling, "profiling", o.profiling, "Also serve Go's /debug/pprof/ handlers on --metrics-bind-address.")
	fs.IntVar(&o.metricsMaxJobSets, "metrics-max-jobsets", o.metricsMaxJobSets, "Maximum number of JobSets exported in the per-JobSet kube_jobset_* series (the first by namespace and name); 0 means no limit.")
	o.secureMetrics.addFlags(fs)
	fs.IntVar(&o.parallelism, "child-write-parallelism", o.parallelism, "Maximum concurrent child Job writes within one JobSet sync.")
	fs.Float32Var(&o.placementQPS, "placement-kube-api-qps", o.placementQPS, "Queries per second of the client that places the pods of exclusive-topology Jobs (its own budget: one write per pod).")
	fs.IntVar(&o.placementBurst, "placement-kube-api-burst", o.placementBurst, "Burst of the client that places the pods of exclusive-topology Jobs.")
	fs.DurationVar(&o.placementTimeout, "topology-placement-timeout", o.placementTimeout, "How long the first pod of an exclusive-topology Job may stay unscheduled before the JobSet reports it (condition TopologyPlacementPending).")
	fs.DurationVar(&o.statusCountersInterval, "status-counters-interval", o.statusCountersInterval, "Least time between two status writes of a JobSet that change only its replicatedJobsStatus counters (ready, succeeded, failed, active, suspended); changes meanwhile are written together. Other status changes are written at once. 0 writes every change at once.")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "Elect a leader through a Lease before reconciling.")
	fs.StringVar(&o.leNamespace, "leader-elect-namespace", o.leNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.leName, "leader-elect-lease-name", o.leName, "Name of the leader election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration, "How long a non-leader waits before trying to take over an unrenewed lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline, "How long the leader retries renewing before giving up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod, "Interval between leader election attempts.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", o.shutdownGrace, "How long in-flight reconciles may take to finish on SIGTERM/SIGINT.")
	fs.DurationVar(&o.apiWaitTimeout, "api-wait-timeout", o.apiWaitTimeout, "How long to wait at start for the JobSet API to be served; 0 fails at once when it is missing.")
}

func (o *options) validate() error {
	var errs []error
	if o.workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	if o.qps <= 0 || o.burst < 1 {
		errs = append(errs, errors.New("--kube-api-qps must be positive and --kube-api-burst at least 1"))
	}
	if o.contentType != runtime.ContentTypeProtobuf && o.contentType != runtime.ContentTypeJSON {
		errs = append(errs, fmt.Errorf("--kube-api-content-type must be %s or %s", runtime.ContentTypeProtobuf, runtime.ContentTypeJSON))
	}
	if o.metricsMaxJobSets < 0 {
		errs = append(errs, errors.New("--metrics-max-jobsets must not be negative"))
	}
	errs = append(errs, o.secureMetrics.validate()...)
	if o.placementQPS <= 0 || o.placementBurst < 1 {
		errs = append(errs, errors.New("--placement-kube-api-qps must be positive and --placement-kube-api-burst at least 1"))
	}
	if o.placementTimeout <= 0 {
		errs = append(errs, errors.New("--topology-placement-timeout must be positive"))
	}
	if o.statusCountersInterval < 0 {
		errs = append(errs, errors.New("--status-counters-interval must not be negative"))
	}
	if o.parallelism < 1 {
		errs = append(errs, errors.New("--child-write-parallelism must be at least 1"))
	}
	if o.leaderElect && (o.leNamespace == "" || o.leName == "" || o.renewDeadline >= o.leaseDuration || o.retryPeriod <= 0) {
		errs = append(errs, errors.New("leader election needs a namespace, a lease name, a renew deadline shorter than the lease duration and a positive retry period"))
	}
	return errors.Join(errs...)
}

func restConfig(o *options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "jobset-controller"
	// Protobuf (the default) for JobSets and every built-in type the
	// controller reads and writes; JSON is still accepted from a server
	// that lacks it. JSON alone is there to compare the two.
	cfg.ContentType = o.contentType
	cfg.AcceptContentTypes = o.contentType
	if o.contentType == runtime.ContentTypeProtobuf {
		cfg.AcceptContentTypes += "," + runtime.ContentTypeJSON
	}
	return cfg, nil
}

// checkAPI fails clearly when the API server does not serve JobSets.
func checkAPI(ctx context.Context, js versioned.Interface, host string, wait time.Duration) error {
	gv := jobset.SchemeGroupVersion.String()
	deadline := time.Now().Add(wait)
	for {
		res, err := js.Discovery().ServerResourcesForGroupVersion(gv)
		if err == nil {
			for _, r := range res.APIResources {
				if r.Name == "jobsets" {
					return nil
				}
			}
			err = errors.New("the group version has no jobsets resource")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the JobSet API %s is not served by the API server at %s (is the JobSet API server running and its APIService registered?): %w", gv, host, err)
		}
		klog.InfoS("Waiting for the JobSet API", "groupVersion", gv, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func run(o *options) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The informers' caches grow with the cluster: collect harder near the
	// container's limit rather than be killed at it.
	if limit, soft, err := memlimit.Apply("/"); err != nil {
		klog.ErrorS(err, "Reading the container's memory limit failed")
	} else if soft > 0 {
		klog.InfoS("Go soft memory limit set from the container's", "limit", limit, "soft", soft)
	}

	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	placementCfg := rest.CopyConfig(cfg)
	placementCfg.QPS, placementCfg.Burst = o.placementQPS, o.placementBurst
	placementKube, err := kubernetes.NewForConfig(placementCfg)
	if err != nil {
		return err
	}
	jsClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Pods are listed as metadata only (protobuf), at the same rate limit.
	podMeta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := checkAPI(ctx, jsClient, cfg.Host, o.apiWaitTimeout); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := jsscheme.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	defer broadcaster.Shutdown()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	recorder := broadcaster.NewRecorder(scheme, controller.EventReportingController)

	m, err := newControllerMetrics(o.metricsMaxJobSets)
	if err != nil {
		return err
	}
	m.installWorkqueueProvider()
	if o.metricsAddr != "" {
		addr, err := serveMetrics(ctx, o.metricsAddr, m.handler(o.profiling), o.profiling)
		if err != nil {
			return err
		}
		klog.InfoS("Serving metrics", "address", addr.String())
	}
	if o.secureMetrics.bindAddress != "" {
		if _, err := serveSecureMetrics(ctx, o.secureMetrics, cfg, m.metricsHandler()); err != nil {
			return err
		}
	}

	var leading atomic.Bool
	var ctrl atomic.Pointer[controller.Controller]
	var watchdog *leaderelection.HealthzAdaptor
	if o.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(o.leaseDuration)
	}
	if o.healthAddr != "" {
		if _, err := serveHealth(ctx, o.healthAddr, watchdog, func() error {
			if !o.leaderElect || leading.Load() {
				if c := ctrl.Load(); c == nil || !c.HasSynced() {
					return errors.New("caches not synced")
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}

	runController := func(ctx context.Context) {
		factories := controller.NewFactories(kube, jsClient, o.resync)
		c, err := controller.New(kube, jsClient, factories, controller.Options{
			Recorder: recorder, Parallelism: o.parallelism, PlacementTimeout: o.placementTimeout, PlacementClient: placementKube,
			StatusCountersInterval: o.statusCountersInterval, Metadata: podMeta,
			Metrics: m.recorder, WorkqueueMetrics: m.workqueue,
		})
		if err != nil {
			klog.ErrorS(err, "Building the controller")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
		ctrl.Store(c)
		// Per-JobSet series are exported by the leader only.
		m.jobsets.SetLister(c.JobSetSummaries())
		defer m.jobsets.SetLister(nil)
		factories.Start(ctx.Done())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := c.Run(ctx, o.workers); err != nil {
				klog.ErrorS(err, "Controller stopped")
			}
		}()
		<-ctx.Done()
		select {
		case <-done:
		case <-time.After(o.shutdownGrace):
			klog.InfoS("Shutdown grace period elapsed")
		}
		factories.Shutdown()
	}

	if !o.leaderElect {
		leading.Store(true)
		runController(ctx)
		return nil
	}

	id, err := os.Hostname()
	if err != nil {
		return err
	}
	id = id + "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leNamespace, Name: o.leName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id, EventRecorder: nil},
	}
	var lost atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leName,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.InfoS("Became leader", "identity", id)
				leading.Store(true)
				runController(ctx)
			},
			OnStoppedLeading: func() {
				leading.Store(false)
				if ctx.Err() == nil {
					lost.Store(true)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if lost.Load() {
		return errors.New("lost leadership")
	}
	klog.InfoS("Shut down")
	return nil
}

// serveHealth serves /healthz and /readyz on addr until ctx ends and
// returns the address listened on.
func serveHealth(ctx context.Context, addr string, watchdog *leaderelection.HealthzAdaptor, ready func() error) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --health-addr %s: %w", addr, err)
	}
	httpserver.Serve(ctx, "health", httpserver.New(healthHandler(watchdog, ready)), ln)
	return ln.Addr(), nil
}

// healthHandler answers /healthz from the leader election watchdog and
// /readyz from ready.
func healthHandler(watchdog *leaderelection.HealthzAdaptor, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
