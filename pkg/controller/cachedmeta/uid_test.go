package cachedmeta

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// TestUIDReadsBackExactly: every UID reads back byte for byte, and only
// lower-case UUIDs are kept as bytes.
func TestUIDReadsBackExactly(t *testing.T) {
	cases := []struct {
		uid     types.UID
		asBytes bool
	}{
		{"", false},
		{"u", false},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", true},
		{uuid.NewUUID(), true},
		{"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", false},
		{"00000000-0000-0000-0000-000000000000", false},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg", false},
		{"0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0", false},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", false},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f00", false},
		{"0f1e2d3c4-b5a-6978-8796-a5b4c3d2e1f0", false},
	}
	for _, c := range cases {
		u := uidOf(c.uid)
		if got := u.UID(); got != c.uid {
			t.Errorf("uidOf(%q).UID() = %q", c.uid, got)
		}
		if asBytes := u.text == "" && c.uid != ""; asBytes != c.asBytes {
			t.Errorf("%q kept as bytes: %v, want %v", c.uid, asBytes, c.asBytes)
		}
	}
}

func FuzzUIDReadsBack(f *testing.F) {
	f.Add("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		if got := uidOf(types.UID(s)).UID(); string(got) != s {
			t.Fatalf("uidOf(%q).UID() = %q", s, got)
		}
	})
}
