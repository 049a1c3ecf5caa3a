package controller

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// internerSize bounds the strings an interner holds: a few hundred
// kilobytes at most.
const internerSize = 4096

// interner makes the cached objects share the strings they repeat (a
// JobSet's name and UID in its children's owner references, namespaces,
// label values, condition reasons): a decoder allocates every string
// anew. When full it forgets everything, so that it holds at most its size
// (and no string of a deleted object for long); objects decoded together,
// such as the Jobs of one JobSet or an initial list, still share theirs.
type interner struct {
	mu   sync.Mutex
	size int
	m    map[string]string
	// owners holds single-owner reference lists by the owner's UID: the
	// Jobs, Service and revisions of a JobSet share one (80 bytes each
	// otherwise). Bounded and cleared like m.
	owners map[types.UID][]metav1.OwnerReference
}

func newInterner(size int) *interner {
	return &interner{size: size, m: make(map[string]string, size), owners: make(map[types.UID][]metav1.OwnerReference)}
}

// ownerRefs returns a shared copy of refs when it is one reference whose
// strings and pointers are already interned, else refs.
func (in *interner) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) != 1 {
		return refs
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	r := &refs[0]
	if v, ok := in.owners[r.UID]; ok && v[0] == *r {
		return v
	}
	if len(in.owners) >= in.size {
		clear(in.owners)
	}
	in.owners[r.UID] = refs
	return refs
}

// get returns the interned copy of s.
func (in *interner) get(s string) string {
	if s == "" {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if len(in.m) >= in.size {
		clear(in.m)
	}
	in.m[s] = s
	return s
}

// Shared values of pointer fields: the cache's objects are never changed
// (readers copy before they edit), so owner references can point at one
// true.
var sharedTrue, sharedFalse = true, false

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &sharedTrue
	default:
		return &sharedFalse
	}
}
