package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/internal/vec"
)

// TestVersion: attnlab version and attnlab -version print the Go toolchain,
// the kernels this process runs and the shipped models' cache, and -json
// the same as fields.
func TestVersion(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	var first string
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, stdout, stderr := attnlab(t, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		for _, want := range []string{runtime.Version(), "kernels  " + vec.Path(), filepath.Join(cache, "attnlab", "models"), "shipped: encoder, lm, reranker", "commit "} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v prints no %q:\n%s", args, want, stdout)
			}
		}
		if first == "" {
			first = stdout
		} else if stdout != first {
			t.Errorf("%v prints\n%s\nattnlab version\n%s", args, stdout, first)
		}
	}
	code, stdout, _ := attnlab(t, "version", "-json")
	var v buildVersion
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v.Go != runtime.Version() || v.Kernels != vec.Path() || v.Models != filepath.Join(cache, "attnlab", "models") {
		t.Errorf("version -json: exit %d, %v, %+v", code, err, v)
	}
}

// TestVersionReadsTheBuild: the commit, its time, a modified checkout, the
// module version and the build tags come from the build information; a
// build that recorded none says "unknown".
func TestVersionReadsTheBuild(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/attnlab/attnlab", Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-04T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}, {Key: "-tags", Value: "purego"}}}
	v := readVersion(info)
	if v.Version != "v1.2.3" || v.Commit != "0123abcd" || v.Time != "2026-12-04T10:00:00Z" || !v.Modified || v.Tags != "purego" {
		t.Errorf("read %+v", v)
	}
	if v := readVersion(nil); v.Commit != "unknown" || v.Version != "(devel)" {
		t.Errorf("no build information: %+v", v)
	}
}
