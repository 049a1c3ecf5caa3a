package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCreatedTime(t *testing.T) {
	ctx := context.Background()
	want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range []string{"1767323045", "2026-01-02T04:04:05+01:00"} {
		got, err := createdTime(ctx, s, ".", "")
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("createdTime(%q) = %v, %v; want %v in UTC", s, got, err, want)
		}
	}
	if _, err := createdTime(ctx, "yesterday", ".", ""); err == nil || !strings.Contains(err.Error(), "neither RFC 3339 nor Unix seconds") {
		t.Errorf("bad time: %v", err)
	}
	if _, err := createdTime(ctx, "", ".", ""); err == nil || !strings.Contains(err.Error(), "--commit") {
		t.Errorf("no time and no commit: %v", err)
	}
	// From git: the committer time of HEAD.
	out, err := exec.Command("git", "-C", "../..", "show", "-s", "--format=%cI", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout: %v", err)
	}
	head, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := createdTime(ctx, "", "../..", "HEAD")
	if err != nil || !got.Equal(head) {
		t.Errorf("from git: %v, %v; want %v", got, err, head)
	}
}

func TestSplitList(t *testing.T) {
	if got := splitList(" linux/amd64, ,linux/arm64,"); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("splitList = %q", got)
	}
	if got := splitList(""); got != nil {
		t.Errorf("splitList(\"\") = %q, want nil (the defaults)", got)
	}
}
