package embeddedetcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Database maintenance of the embedded etcd. The API server compacts old
// revisions (--etcd-compaction-interval), but compaction leaves the freed
// pages in the file: the file only shrinks by defragmentation, and a
// NOSPACE alarm, once raised, stays until it is disarmed. A standalone
// member has no operator running etcdctl, so the server does both.

// defragFreeRatio: defragment when at least this share of the file is free.
const defragFreeRatio = 0.5

// alarmClearRatio: disarm NOSPACE once the data in use is below this share
// of the quota, so that a write does not raise it again at once.
const alarmClearRatio = 0.5

var (
	dbSizeBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "jobset_apiserver_embedded_etcd_db_size_bytes", StabilityLevel: metrics.ALPHA,
		Help: "Size of the embedded etcd's database file.",
	})
	dbSizeInUseBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "jobset_apiserver_embedded_etcd_db_size_in_use_bytes", StabilityLevel: metrics.ALPHA,
		Help: "Bytes of the embedded etcd's database file in use; the rest is free after compaction until a defragmentation returns it.",
	})
	quotaBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "jobset_apiserver_embedded_etcd_quota_backend_bytes", StabilityLevel: metrics.ALPHA,
		Help: "The embedded etcd's backend quota (--embedded-etcd-quota-backend-bytes).",
	})
	nospaceAlarm = metrics.NewGauge(&metrics.GaugeOpts{
		Name: "jobset_apiserver_embedded_etcd_nospace_alarm", StabilityLevel: metrics.ALPHA,
		Help: "1 while the embedded etcd's NOSPACE alarm is raised (writes are refused), else 0.",
	})
	defragsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "jobset_apiserver_embedded_etcd_defragmentations_total", StabilityLevel: metrics.ALPHA,
		Help: "Defragmentations of the embedded etcd's database, by result.",
	}, []string{"result"})
	registerMetrics sync.Once
)

// maintainer watches one member's database.
type maintainer struct {
	etcd        *embed.Etcd
	quota       int64
	minDB       int64
	minInterval time.Duration
	onChange    func(raised bool, message string)
	lastDefrag  time.Time // of a mostly free database; only check touches it
	alarm       atomic.Bool
	stop        chan struct{}
	done        chan struct{}
	kicked      chan struct{}
}

func newMaintainer(e *embed.Etcd, cfg Config) *maintainer {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(dbSizeBytes, dbSizeInUseBytes, quotaBytes, nospaceAlarm, defragsTotal)
	})
	m := &maintainer{etcd: e, quota: cfg.QuotaBackendBytes, minDB: cfg.MinDefragBytes, minInterval: cfg.MinDefragInterval,
		onChange: cfg.OnAlarmChange,
		stop:     make(chan struct{}), done: make(chan struct{}), kicked: make(chan struct{}, 1)}
	quotaBytes.Set(float64(m.quota))
	m.check()
	go m.run(cfg.MaintenanceInterval)
	return m
}

func (m *maintainer) run(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.kicked:
		}
		m.check()
	}
}

// shutdown stops the loop; the member must still be running.
func (m *maintainer) shutdown() {
	close(m.stop)
	<-m.done
}

// check records the sizes, defragments a mostly free file and disarms a
// NOSPACE alarm once the data fits again.
func (m *maintainer) check() {
	be := m.etcd.Server.Backend()
	alarmed := m.nospaceRaised()
	if alarmed {
		m.compact()
	}
	size, inUse := be.Size(), be.SizeInUse()
	if alarmed {
		klog.V(2).InfoS("The embedded etcd's NOSPACE alarm is raised", "size", size, "inUse", inUse, "quota", m.quota)
	}
	free := size - inUse
	mostlyFree := free > 0 && float64(free) >= defragFreeRatio*float64(size) && size >= m.minDB
	fits := float64(inUse) < alarmClearRatio*float64(m.quota)
	recovering := alarmed && fits && free > 0
	if mostlyFree && !m.lastDefrag.IsZero() && time.Since(m.lastDefrag) < m.minInterval {
		klog.V(2).InfoS("Defragmentation of the embedded etcd postponed", "lastDefrag", m.lastDefrag, "minInterval", m.minInterval)
		mostlyFree = false
	}
	if mostlyFree || recovering {
		start := time.Now()
		if err := m.etcd.Server.Defragment(); err != nil {
			defragsTotal.WithLabelValues("error").Inc()
			klog.ErrorS(err, "Defragmenting the embedded etcd failed")
		} else {
			defragsTotal.WithLabelValues("success").Inc()
			klog.InfoS("Defragmented the embedded etcd", "sizeBefore", size, "sizeAfter", be.Size(), "duration", time.Since(start))
		}
		if !recovering {
			m.lastDefrag = time.Now()
		}
		size, inUse = be.Size(), be.SizeInUse()
	}
	if alarmed && float64(inUse) < alarmClearRatio*float64(m.quota) && size < m.quota {
		if err := m.disarm(); err != nil {
			klog.ErrorS(err, "Disarming the embedded etcd's NOSPACE alarm failed")
		} else {
			klog.InfoS("Disarmed the embedded etcd's NOSPACE alarm", "size", size, "inUse", inUse, "quota", m.quota)
			alarmed = m.nospaceRaised()
		}
	}
	if was := m.alarm.Swap(alarmed); was != alarmed {
		m.report(alarmed, size, inUse)
	}
	dbSizeBytes.Set(float64(size))
	dbSizeInUseBytes.Set(float64(inUse))
	if alarmed {
		nospaceAlarm.Set(1)
	} else {
		nospaceAlarm.Set(0)
	}
}

func (m *maintainer) nospaceRaised() bool {
	for _, a := range m.etcd.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// compact drops the history of deleted and overwritten keys. The API
// server's own compactor cannot while NOSPACE is raised (it records its
// progress with a write, which etcd refuses), so without this the alarm
// would never clear. Watchers behind the compacted revision relist.
func (m *maintainer) compact() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev := m.etcd.Server.KV().Rev()
	_, err := m.etcd.Server.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true})
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) && !errors.Is(err, mvcc.ErrCompacted) {
		klog.ErrorS(err, "Compacting the embedded etcd under its NOSPACE alarm failed", "revision", rev)
	}
}

func (m *maintainer) disarm() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.etcd.Server.Alarm(ctx, &pb.AlarmRequest{
		Action:   pb.AlarmRequest_DEACTIVATE,
		MemberID: uint64(m.etcd.Server.MemberID()),
		Alarm:    pb.AlarmType_NOSPACE,
	})
	return err
}

// kick asks for a check soon, e.g. after a write was refused for space.
func (m *maintainer) kick() {
	select {
	case m.kicked <- struct{}{}:
	default:
	}
}

// report tells the logs and the OnAlarmChange hook that the alarm was
// raised or cleared.
func (m *maintainer) report(raised bool, size, inUse int64) {
	var msg string
	if raised {
		msg = fmt.Sprintf("The embedded etcd's NOSPACE alarm is raised: its database (%d bytes, %d in use) reached the quota of %d bytes. "+
			"JobSet writes get 507 until JobSets are deleted; reads and deletes work, and the alarm clears by itself once the data in use is under half the quota.",
			size, inUse, m.quota)
		klog.ErrorS(nil, msg)
	} else {
		msg = fmt.Sprintf("The embedded etcd's NOSPACE alarm is cleared (database %d bytes, %d in use, quota %d bytes): JobSet writes work again.", size, inUse, m.quota)
		klog.InfoS(msg)
	}
	if m.onChange != nil {
		m.onChange(raised, msg)
	}
}
