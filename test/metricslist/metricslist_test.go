package metricslist

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := Read(write("ok.txt", "# comment\n\nrequests_total counter code,verb\n  db_size_bytes gauge  \n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Family{
		"requests_total": {Type: "counter", Labels: []string{"code", "verb"}},
		"db_size_bytes":  {Type: "gauge"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read = %#v, want %#v", got, want)
	}
	for name, content := range map[string]string{
		"no type":    "requests_total\n",
		"extra":      "requests_total counter code verb\n",
		"empty list": "# nothing\n",
	} {
		if _, err := Read(write(strings.ReplaceAll(name, " ", "-"), content)); err == nil {
			t.Errorf("%s: Read accepted %q", name, content)
		}
	}
}
