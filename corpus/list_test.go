package corpus

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(path, []byte("# Go packages\n\ngolang-foo-dev\n  golang-bar-dev  # the bar library\ngolang-gopkg-yaml.v3-dev\nlibc++-dev\n"), 0o644)
	got, err := ReadList(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"golang-foo-dev", "golang-bar-dev", "golang-gopkg-yaml.v3-dev", "libc++-dev"}
	if !slices.Equal(got, want) {
		t.Errorf("ReadList = %q, want %q", got, want)
	}
}

func TestReadListBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"upper", "golang-foo-dev\nGolang-Bar-dev\n", "upper.txt:2: \"Golang-Bar-dev\" is not a Debian package name"},
		{"space", "golang-foo-dev golang-bar-dev\n", "space.txt:1: \"golang-foo-dev golang-bar-dev\" is not"},
		{"path", "# x\n../etc\n", "path.txt:2: \"../etc\" is not"},
		{"short", "a\n", "short.txt:1: \"a\" is not"},
		{"repeated", "golang-foo-dev\n\ngolang-foo-dev\n", "repeated.txt:3: golang-foo-dev is listed again (first on line 1)"},
		{"empty", "# nothing yet\n\n", "empty.txt lists no package"},
	} {
		path := filepath.Join(dir, tc.name+".txt")
		os.WriteFile(path, []byte(tc.text), 0o644)
		_, err := ReadList(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadList(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing list: error %v, want one naming the file", err)
	}
}

// TestDefaultList: the list in the repository (and the binary) is the
// 300 Debian Go packages of the shipped models, each a valid name, none
// twice.
func TestDefaultList(t *testing.T) {
	names := DefaultList()
	if len(names) != 300 {
		t.Errorf("%s lists %d packages, want the 300 the shipped models were trained from", ListFile, len(names))
	}
	fromFile, err := ReadList(ListFile)
	if err != nil || !slices.Equal(fromFile, names) {
		t.Errorf("ReadList(%s): %d names, %v; the embedded list has %d", ListFile, len(fromFile), err, len(names))
	}
}
