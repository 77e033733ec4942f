package orchestrator

import (
	"testing"

	"github.com/composebox/composebox/compose"
)

func TestTaskHoldsAreCounted(t *testing.T) {
	dir := t.TempDir()
	holdTask(dir, "t")
	holdTask(dir, "t")
	if releaseTask(dir, "t") {
		t.Error("released with one hold left")
	}
	if !releaseTask(dir, "t") {
		t.Error("last hold not released")
	}
	if releaseTask(dir, "t") {
		t.Error("released a task never held")
	}
}

func TestConfigOf(t *testing.T) {
	for _, tc := range []struct {
		res  *compose.Resolution
		want string
	}{
		{nil, ""},
		{&compose.Resolution{Source: compose.SourceFile, Files: []string{"/a/compose.yaml", "/a/x.yaml"}}, "/a/compose.yaml,/a/x.yaml"},
		{&compose.Resolution{Source: compose.SourceDockerfile, Dockerfile: "/a/Dockerfile"}, "/a/Dockerfile"},
		{&compose.Resolution{Source: compose.SourceDefault, Image: "composebox/base:1"}, "image composebox/base:1"},
		{&compose.Resolution{Source: compose.SourceInline}, "inline"},
	} {
		if got := configOf(tc.res); got != tc.want {
			t.Errorf("configOf(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}
