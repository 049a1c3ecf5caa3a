package replicatedjob

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nativejobset/jobset/pkg/apis/jobset"
)

// projectingWatch turns a watch of JobSets into a watch of ReplicatedJobs.
// An added, modified or deleted JobSet yields the same event for each of
// its replicatedJobs; a bookmark keeps its resourceVersion and annotations;
// errors pass through.
type projectingWatch struct {
	src    watch.Interface
	field  fields.Selector
	out    chan watch.Event
	done   chan struct{}
	stopMu sync.Once
}

func newProjectingWatch(src watch.Interface, field fields.Selector) watch.Interface {
	w := &projectingWatch{
		src:   src,
		field: field,
		out:   make(chan watch.Event),
		done:  make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *projectingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *projectingWatch) Stop() {
	w.stopMu.Do(func() {
		close(w.done)
		w.src.Stop()
	})
}

func (w *projectingWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.done:
		return false
	}
}

func (w *projectingWatch) run() {
	defer close(w.out)
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.src.ResultChan():
			if !ok {
				return
			}
		case <-w.done:
			return
		}
		obj := ev.Object
		// The watch cache wraps objects to cache their serializations.
		if c, ok := obj.(runtime.CacheableObject); ok {
			obj = c.GetObject()
		}
		js, isJobSet := obj.(*jobset.JobSet)
		switch {
		case !isJobSet:
			if !w.send(ev) {
				return
			}
		case ev.Type == watch.Bookmark:
			mark := &jobset.ReplicatedJobResource{}
			mark.ResourceVersion = js.ResourceVersion
			mark.Annotations = js.Annotations
			if !w.send(watch.Event{Type: watch.Bookmark, Object: mark}) {
				return
			}
		default:
			items := projectAll(js, w.field)
			for i := range items {
				if !w.send(watch.Event{Type: ev.Type, Object: &items[i]}) {
					return
				}
			}
		}
	}
}
