package corpus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/internal/readlimit"
)

// A Source is a folder of Go import paths.
type Source struct {
	Name string // "std" or "debian/NAME": the first elements of its documents' paths
	Dir  string // the folder: $GOROOT/src, or pkgs/NAME/usr/share/gocode/src
}

// Std is the standard library of the Go installation at goroot.
func Std(goroot string) Source {
	return Source{Name: "std", Dir: filepath.Join(goroot, "src")}
}

// Debian returns the sources of the packages unpacked in the corpus folder
// dir (by Fetch), in name order. A package that ships no Go source is a
// source with no file. It is an error when dir holds no unpacked package.
func Debian(dir string) ([]Source, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("corpus: %s is a file, not a corpus folder", dir)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "pkgs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var srcs []Source
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() && ValidName(e.Name()) {
			srcs = append(srcs, Source{Name: "debian/" + e.Name(), Dir: filepath.Join(dir, "pkgs", e.Name(), GoSrc)})
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("corpus: %s holds no unpacked package (no pkgs/NAME folder; see attnlab corpus fetch)", dir)
	}
	return srcs, nil
}

// Options are the options of Walk and Read.
type Options struct {
	// MaxFileBytes skips larger files (they are mostly data tables): 0
	// means 1 MB (1<<20 bytes), a negative value no limit.
	MaxFileBytes int64
}

// maxFileBytes is the limit of MaxFileBytes: 1 MB for 0.
func (o Options) maxFileBytes() int64 {
	if o.MaxFileBytes == 0 {
		return 1 << 20
	}
	return o.MaxFileBytes
}

// Document is one kept source file.
type Document struct {
	Path string // Source.Name + "/" + the file's path in the source: "std/net/http/server.go"
	Unit string // the import path of its folder ("net/http"): the unit of the held-out split
	File string // the file on disk
	Text []byte
}

// Stats counts what a walk kept and skipped. Skipped files are .go files;
// each is counted under the first reason that applies, in the order of the
// fields.
type Stats struct {
	Sources      int   // sources walked
	EmptySources int   // of which without any kept file (a missing folder included)
	Files        int   // files kept
	Bytes        int64 // their bytes
	StdFiles     int   // of Files, from the source named "std"
	StdBytes     int64

	Hidden     int   // under a folder whose name starts with '.' or '_', or named so
	TestData   int   // under a testdata folder
	Vendored   int   // under vendor, third_party, thirdparty or Godeps
	Tests      int   // _test.go files
	Empty      int   // empty files
	Large      int   // larger than Options.MaxFileBytes
	Generated  int   // carrying the "Code generated … DO NOT EDIT." marker
	Duplicates int   // equal, up to trailing white space, to a file kept before
	DupBytes   int64 // bytes of the duplicates
}

// Read returns the documents that Walk keeps, with its Stats.
func Read(ctx context.Context, srcs []Source, opt Options) ([]Document, Stats, error) {
	var docs []Document
	st, err := Walk(ctx, srcs, opt, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, st, err
}

// Walk calls fn with each kept document of srcs, in order (see the package
// documentation for what is kept), and returns the counts. An error of fn,
// or the cancellation of ctx, stops the walk and is returned. A missing
// source folder is an error, except a Debian package's (a package without
// Go source: a transitional or data-only package); so is a walk that keeps
// no file at all.
func Walk(ctx context.Context, srcs []Source, opt Options, fn func(Document) error) (Stats, error) {
	var st Stats
	maxBytes := opt.maxFileBytes()
	seen := map[[sha256.Size]byte]bool{}
	for _, src := range srcs {
		st.Sources++
		kept := st.Files
		err := filepath.WalkDir(src.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == src.Dir && errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(src.Name, "debian/") {
					return fs.SkipAll // a Debian package without Go source
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() || !strings.HasSuffix(name, ".go") || !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(src.Dir, path)
			rel = filepath.ToSlash(rel)
			switch excluded(rel) {
			case "hidden":
				st.Hidden++
				return nil
			case "testdata":
				st.TestData++
				return nil
			case "vendor":
				st.Vendored++
				return nil
			}
			if strings.HasSuffix(name, "_test.go") {
				st.Tests++
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case fi.Size() == 0:
				st.Empty++
				return nil
			case maxBytes > 0 && fi.Size() > maxBytes:
				st.Large++
				return nil
			}
			limit := int64(readlimit.SourceFileBytes)
			if maxBytes > 0 {
				limit = min(limit, maxBytes)
			}
			text, err := readlimit.File(path, limit) // a link to /dev/zero stops here
			var tooLarge *readlimit.TooLargeError
			if errors.As(err, &tooLarge) {
				st.Large++
				return nil
			}
			if err != nil {
				return err
			}
			if Generated(text) {
				st.Generated++
				return nil
			}
			h := sha256.Sum256(normalize(text))
			if seen[h] {
				st.Duplicates++
				st.DupBytes += int64(len(text))
				return nil
			}
			seen[h] = true
			st.Files++
			st.Bytes += int64(len(text))
			if src.Name == "std" {
				st.StdFiles++
				st.StdBytes += int64(len(text))
			}
			return fn(Document{Path: src.Name + "/" + rel, Unit: unitOf(rel), File: path, Text: text})
		})
		if err != nil {
			return st, fmt.Errorf("corpus: source %s: %w", src.Name, err)
		}
		if st.Files == kept {
			st.EmptySources++
		}
	}
	if st.Files == 0 {
		names := make([]string, 0, 3)
		for i, s := range srcs {
			if i == 3 {
				names = append(names, "…")
				break
			}
			names = append(names, s.Dir)
		}
		return st, fmt.Errorf("corpus: no usable Go file in %s", strings.Join(names, ", "))
	}
	return st, nil
}

// excluded names the reason a file at the slash-separated path rel is left
// out for its folders or its name, or returns "".
func excluded(rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, ".") || strings.HasPrefix(p, "_"): // ignored by the go command
			return "hidden"
		case i == len(parts)-1:
		case p == "testdata":
			return "testdata"
		case p == "vendor" || p == "third_party" || p == "thirdparty" || p == "Godeps":
			return "vendor"
		}
	}
	return ""
}

func unitOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// normalize drops the white space at the end of each line and the blank
// lines at the end of text, the differences between copies of a file that
// do not matter to a model.
func normalize(text []byte) []byte {
	out := make([]byte, 0, len(text))
	for line := range bytes.Lines(text) {
		out = append(out, bytes.TrimRight(line, " \t\r\n")...)
		out = append(out, '\n')
	}
	return bytes.TrimRight(out, "\n")
}

// Generated reports whether a Go file carries the standard marker
// "// Code generated … DO NOT EDIT." on a line of its own before its
// package clause (https://go.dev/s/generatedcode).
func Generated(text []byte) bool {
	head := text
	if bytes.HasPrefix(text, []byte("package ")) {
		head = nil
	} else if i := bytes.Index(text, []byte("\npackage ")); i >= 0 {
		head = text[:i]
	}
	for line := range bytes.Lines(head) {
		if bytes.HasPrefix(line, []byte("// Code generated ")) && bytes.HasSuffix(bytes.TrimSpace(line), []byte("DO NOT EDIT.")) {
			return true
		}
	}
	return false
}
