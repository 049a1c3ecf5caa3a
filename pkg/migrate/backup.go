package migrate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
	// JobSet is the defaulted native object: metadata to copy, spec and
	// status.
	JobSet   *v1alpha2.JobSet `json:"jobSet"`
	Children []Child          `json:"children"`
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

// writeBackup writes an item atomically (temporary file, fsync, rename).
func writeBackup(dir string, it *Item) error {
	data, err := json.MarshalIndent(it, "", "  ")
	if err != nil {
		return err
	}
	path := backupFile(dir, it.JobSet.Namespace, it.JobSet.Name)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
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
	return os.Rename(tmp.Name(), path)
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
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
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
		items = append(items, it)
	}
	sortItems(items)
	return items, nil
}

// removeStaleBackups deletes backup files of JobSets that no longer exist
// under the CRD (deleted between two runs that both found the CRD).
func removeStaleBackups(dir string, items []*Item) ([]string, error) {
	keep := map[string]bool{}
	for _, it := range items {
		keep[filepath.Base(backupFile(dir, it.JobSet.Namespace, it.JobSet.Name))] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") || keep[n] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return removed, err
		}
		removed = append(removed, n)
	}
	return removed, nil
}

func sortItems(items []*Item) {
	sort.Slice(items, func(i, j int) bool { return items[i].key() < items[j].key() })
}
