package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// sizeLimitedRESTOptions turns etcd's refusal of an object too large to
// store into a 413 that names the limit. Without it the refusal ("etcdserver:
// request is too large", or the gRPC client's own message size limit) is a
// 500, which clients retry and users cannot act on.
type sizeLimitedRESTOptions struct {
	generic.RESTOptionsGetter
	// limit is etcd's --max-request-bytes when known (the embedded etcd's),
	// else 0.
	limit int64
	// onNoSpace, when set, is called when etcd refuses a write for space.
	onNoSpace func()
}

func (g sizeLimitedRESTOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	inner := opts.Decorator
	if inner == nil {
		inner = generic.UndecoratedStorage
	}
	opts.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := inner(config, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return nil, nil, err
		}
		return &sizeLimitedStorage{Interface: s, resource: resource, limit: g.limit, onNoSpace: g.onNoSpace}, destroy, nil
	}
	return opts, nil
}

type sizeLimitedStorage struct {
	storage.Interface
	resource  schema.GroupResource
	limit     int64
	onNoSpace func()
}

func (s *sizeLimitedStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return s.interpret(s.Interface.Create(ctx, key, obj, out, ttl))
}

func (s *sizeLimitedStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object,
) error {
	return s.interpret(s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject))
}

func (s *sizeLimitedStorage) interpret(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) || strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error()) {
		if s.onNoSpace != nil {
			s.onNoSpace()
		}
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure,
			Code:   http.StatusInsufficientStorage,
			Reason: "InsufficientStorage",
			Message: fmt.Sprintf("etcd's database is full (NOSPACE alarm): %s cannot be written until space is freed by deleting objects; reads and deletes still work",
				s.resource.Resource),
		}}
	}
	if !tooLargeForEtcd(err) {
		return err
	}
	limit := "the etcd server's request size limit (its --max-request-bytes)"
	if s.limit > 0 {
		limit = fmt.Sprintf("the storage limit of %d bytes (the embedded etcd's --embedded-etcd-max-request-bytes)", s.limit)
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"the %s object, as stored with its metadata and defaults, is larger than %s; make it smaller (for example fewer or shorter annotations, labels, environment variables or templates)",
		s.resource.Resource, limit))
}

// tooLargeForEtcd reports whether err is etcd refusing a request for its
// size, on the server or in the client.
func tooLargeForEtcd(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return true
	}
	if strings.Contains(err.Error(), rpctypes.ErrRequestTooLarge.Error()) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}
