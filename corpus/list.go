package corpus

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"strings"
)

// ListFile is the package list the shipped models were trained from, in
// this folder of the repository and embedded in the binary: 300 Debian Go
// source packages (attnlab corpus fetch's default -list).
const ListFile = "debian-go-packages.txt"

//go:embed debian-go-packages.txt
var defaultList []byte

// DefaultList returns the names of ListFile, the list the shipped models
// were trained from.
func DefaultList() []string {
	names, err := parseList(bytes.NewReader(defaultList), ListFile)
	if err != nil {
		panic(err.Error()) // TestDefaultList reads it
	}
	return names
}

// ValidName reports whether name is a well-formed Debian package name:
// at least two characters, lower-case letters, digits and "+-.", starting
// with a letter or digit (Debian Policy §5.6.1). Such a name is also safe
// as a folder name.
func ValidName(name string) bool {
	if len(name) < 2 {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case i > 0 && (c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// ReadList reads a package list: one Debian package name a line, with
// blank lines and lines starting with '#' ignored (a '#' after a name
// starts a comment too). A malformed or repeated name is an error naming
// the file and line; so is a list without any name.
func ReadList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: package list: %w", err)
	}
	defer f.Close()
	return parseList(f, path)
}

// parseList reads the list r, called path in the errors (see ReadList).
func parseList(r io.Reader, path string) ([]string, error) {
	var names []string
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		switch {
		case text == "":
			continue
		case !ValidName(text):
			return nil, fmt.Errorf("corpus: %s:%d: %q is not a Debian package name", path, line, text)
		case seen[text] > 0:
			return nil, fmt.Errorf("corpus: %s:%d: %s is listed again (first on line %d)", path, line, text, seen[text])
		}
		seen[text] = line
		names = append(names, text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: %s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("corpus: %s lists no package", path)
	}
	return names, nil
}
