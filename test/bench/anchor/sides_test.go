package anchor

import (
	"reflect"
	"testing"
)

func TestSidesToRun(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    map[string]bool
		wantErr bool
	}{
		{spec: "", want: map[string]bool{"ours": true, "upstream": true, "plain": true}},
		{spec: "ours", want: map[string]bool{"ours": true}},
		{spec: "ours, plain", want: map[string]bool{"ours": true, "plain": true}},
		{spec: "ours,kind", wantErr: true},
		{spec: ",", wantErr: true},
	} {
		got, err := sidesToRun(tc.spec)
		if tc.wantErr {
			if err == nil {
				t.Errorf("sidesToRun(%q) = %v, want an error", tc.spec, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("sidesToRun(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
}
