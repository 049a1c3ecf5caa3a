package migrate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nativejobset/jobset/pkg/apis/jobset/v1alpha2"
)

// Child is an object a JobSet owned under upstream.
type Child struct {
	// Kind is Job, Service, PersistentVolumeClaim, or the kind of an
	// object of an extra resource.
	Kind string `json:"kind"`
	// Resource is "<resource>.<version>.<group>" for objects of the extra
	// child resources; empty for the three kinds above.
	Resource string    `json:"resource,omitempty"`
	Name     string    `json:"name"`
	UID      types.UID `json:"uid"`
	// The flags of the old owner reference, given to the new one.
	Controller         bool `json:"controller,omitempty"`
	BlockOwnerDeletion bool `json:"blockOwnerDeletion,omitempty"`
}

// Item is one JobSet to migrate, as its backup file holds it.
type Item struct {
	// OldUID is the JobSet's UID under the CRD.
	OldUID types.UID `json:"oldUID"`
	// ResourceVersion is the JobSet's under the CRD when it was backed up;
	// a different one before the CRD's deletion means a write since.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// JobSet is the defaulted native object: metadata to copy, spec and
	// status.
	JobSet   *v1alpha2.JobSet `json:"jobSet"`
	Children []Child          `json:"children"`

	// file is the backup's base name, for an item read from one.
	file string
}

func (it *Item) key() string { return it.JobSet.Namespace + "/" + it.JobSet.Name }

// metaToCopy keeps the metadata a native copy carries over: identity,
// labels, annotations and owner references. UIDs, versions, timestamps,
// managed fields and finalizers belong to the old object.
func metaToCopy(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		Labels:          m.Labels,
		Annotations:     m.Annotations,
		OwnerReferences: m.OwnerReferences,
	}
}

func backupFile(dir, namespace, name string) string {
	// Namespaces and names are DNS labels or subdomains: no underscore.
	return filepath.Join(dir, namespace+"_"+name+".json")
}

// writeBackup writes an item atomically.
func writeBackup(dir string, it *Item) error {
	data, err := json.MarshalIndent(it, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(dir, backupFile(dir, it.JobSet.Namespace, it.JobSet.Name), append(data, '\n'))
}

// writeAtomic writes path through a temporary file (fsync, rename) and
// fsyncs the directory, so that a crash leaves the old or the new file and
// a finished write survives a power loss.
func writeAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the directory's entries (a rename) durable. A variable, so
// that tests can see when it runs.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// isBackup tells backup files from markers, temporary files and
// directories.
func isBackup(e os.DirEntry) bool {
	return !e.IsDir() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".")
}

// readBackups loads every item of the directory, sorted by namespace and
// name.
func readBackups(dir string) ([]*Item, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var items []*Item
	for _, e := range entries {
		if !isBackup(e) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		it := &Item{}
		if err := json.Unmarshal(data, it); err != nil {
			return nil, fmt.Errorf("backup %s: %w", e.Name(), err)
		}
		if it.JobSet == nil || it.JobSet.Name == "" || it.OldUID == "" {
			return nil, fmt.Errorf("backup %s: no JobSet or old UID", e.Name())
		}
		it.file = e.Name()
		items = append(items, it)
	}
	sortItems(items)
	return items, nil
}

// doneMarker records that a backup's JobSet was migrated: its children
// point at the native JobSet NewUID. A later run skips the backup rather
// than create a JobSet deleted since and start its workload again.
type doneMarker struct {
	OldUID types.UID `json:"oldUID"`
	NewUID types.UID `json:"newUID"`
}

func markerFile(backup string) string {
	return strings.TrimSuffix(backup, ".json") + ".done"
}

func writeMarker(dir string, it *Item, newUID types.UID) error {
	data, err := json.Marshal(doneMarker{OldUID: it.OldUID, NewUID: newUID})
	if err != nil {
		return err
	}
	return writeAtomic(dir, markerFile(backupFile(dir, it.JobSet.Namespace, it.JobSet.Name)), append(data, '\n'))
}

// readMarker returns the item's marker; nil when it has none, or when the
// marker belongs to another JobSet of the same name.
func readMarker(dir string, it *Item) (*doneMarker, error) {
	path := markerFile(backupFile(dir, it.JobSet.Namespace, it.JobSet.Name))
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mk := &doneMarker{}
	if err := json.Unmarshal(data, mk); err != nil {
		return nil, fmt.Errorf("marker %s: %w", filepath.Base(path), err)
	}
	if mk.OldUID != it.OldUID {
		return nil, nil
	}
	return mk, nil
}

// staleBackups returns the backups of the directory whose JobSet the CRD
// no longer holds (by UID): deleted since an earlier run, or backups of an
// earlier migration with the CRD installed again since.
func staleBackups(dir string, live []*Item) ([]*Item, error) {
	uids := map[types.UID]bool{}
	for _, it := range live {
		uids[it.OldUID] = true
	}
	backups, err := readBackups(dir)
	if err != nil {
		return nil, err
	}
	var stale []*Item
	for _, it := range backups {
		if !uids[it.OldUID] {
			stale = append(stale, it)
		}
	}
	return stale, nil
}

// setAside moves backups (with their markers) into a new subdirectory,
// where no run reads them, and returns its path.
func setAside(dir string, items []*Item, now time.Time) (string, error) {
	to := filepath.Join(dir, "set-aside-"+now.UTC().Format("20060102T150405.000000000Z"))
	if err := os.Mkdir(to, 0o700); err != nil {
		return "", err
	}
	for _, it := range items {
		for _, n := range []string{it.file, markerFile(it.file)} {
			err := os.Rename(filepath.Join(dir, n), filepath.Join(to, n))
			if err != nil && !os.IsNotExist(err) {
				return to, err
			}
		}
	}
	if err := syncDir(to); err != nil {
		return to, err
	}
	return to, syncDir(dir)
}

func sortItems(items []*Item) {
	sort.Slice(items, func(i, j int) bool { return items[i].key() < items[j].key() })
}
