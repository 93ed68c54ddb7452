package retrieve

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/attnlab/attnlab/internal/readlimit"
)

// A Pair is one example of the code search task: a natural-language query
// (a doc comment without its leading name) and the code it describes (the
// declaration and body, without the doc comment).
type Pair struct {
	ID      string `json:"id"`      // package.Recv.Name, unique in a dataset
	Query   string `json:"query"`   // first paragraph of the doc comment, name removed
	Code    string `json:"code"`    // source text of the declaration, no doc comment
	Package string `json:"package"` // directory relative to the source root ("." for the root)
	File    string `json:"file"`    // slash-separated path relative to the source root
	Line    int    `json:"line"`    // line of the func keyword
}

// Options controls BuildDataset; DefaultOptions gives the usual values.
// Every field is taken as set: a fraction of 0 puts no package in that
// split.
type Options struct {
	ValFrac  float64 // fraction of the hash range of package paths for validation
	TestFrac float64 // fraction for test
	MinWords int     // shortest query kept, in words

	// More are further source trees read after src, in order (the Debian
	// packages of the corpus): their pairs are split by package the same
	// way, deduplicated against everything read before, and a pair whose
	// query is that of a validation or test pair of src is not trained on.
	More []Source

	// Progress, if not nil, is called with the number of files read so
	// far and their total, from the goroutine of BuildDataset.
	Progress func(done, total int)
}

// A Source is a tree of Go import paths: Dir holds them, Name prefixes
// the files of its pairs.
type Source struct{ Name, Dir string }

// DefaultOptions are 80/10/10 splits and queries of at least 3 words.
func DefaultOptions() Options { return Options{ValFrac: 0.1, TestFrac: 0.1, MinWords: 3} }

// Stats describes what BuildDataset saw and kept.
type Stats struct {
	Files       int // non-test .go files read
	Generated   int // of which skipped as generated ("Code generated … DO NOT EDIT.")
	Unparsable  int // of which skipped because they do not parse
	Funcs       int // function and method declarations with a body, init excluded
	Documented  int // of which have a doc comment
	NoQuery     int // documented, but nothing left of the comment (only the name, Deprecated, directives) or fewer than MinWords words
	Variants    int // dropped: same package, receiver and name as an earlier declaration (build-tag variants)
	Duplicates  int // dropped: the same code, up to white space, as an earlier pair
	Kept        int
	More        int           // of Kept, from the sources of Options.More
	HeldQuery   int           // dropped from the training pairs: the query of a validation or test pair of src
	Split       [3]SplitStats // train, validation, test
	QueryWords  float64       // mean words per kept query
	CodeLines   float64       // mean lines per kept code document
	CodeBytes   float64       // mean bytes per kept code document
	SharedQuery int           // kept pairs whose query text equals another kept pair's in the same split
}

// SplitStats counts one split.
type SplitStats struct {
	Pairs, Packages int
}

// The splits of a dataset, each a file of its folder (SplitFile).
const (
	SplitTrain = "train"
	SplitVal   = "val"
	SplitTest  = "test"
)

// SplitNames names the three splits in the order of Stats.Split.
var SplitNames = [3]string{SplitTrain, SplitVal, SplitTest}

// BuildDataset extracts query–code pairs from the Go source tree at src and
// splits them by package into train, validation and test.
//
// It reads the non-test .go files (skipping testdata and vendor folders,
// hidden and _-prefixed ones, and generated files) and keeps every function
// and method that has a body and a doc comment, except init. The query is the
// first paragraph of the doc comment, on one line, after dropping directives
// (//go:…), Deprecated paragraphs and the leading name (see QueryFromDoc);
// pairs whose query has fewer than opt.MinWords words are dropped. The code is
// the declaration from the func keyword to the closing brace, as written.
//
// Two kinds of pair would be false negatives for each other at evaluation
// (a second correct answer scored as wrong), so they are dropped, keeping the
// first by path: declarations with the same package, receiver and name
// (build-tag variants such as file_unix.go and file_windows.go), and code
// identical to earlier code up to white space.
//
// The split is by package directory: a directory goes to test when an FNV-1a
// hash of its path falls in the first TestFrac of the range, to validation in
// the next ValFrac, and to train otherwise, so no package contributes to two
// splits and a package's split does not depend on the rest of the tree.
//
// It returns an error when src cannot be read or holds no usable pair, and
// ctx's error when ctx is done before the files are read.
func BuildDataset(ctx context.Context, src string, opt Options) (train, val, test []Pair, st Stats, err error) {
	if !(opt.ValFrac >= 0) || !(opt.TestFrac >= 0) || !(opt.ValFrac+opt.TestFrac <= 1) {
		return nil, nil, nil, st, fmt.Errorf("retrieve: split fractions val %g, test %g: want >= 0 with a sum of at most 1", opt.ValFrac, opt.TestFrac)
	}
	if opt.MinWords < 1 {
		return nil, nil, nil, st, fmt.Errorf("retrieve: shortest query %d words: want >= 1", opt.MinWords)
	}
	type key struct{ pkg, recv, name string }
	seenDecl := map[key]bool{}
	seenCode := map[[sha256.Size]byte]bool{}
	heldQuery := map[string]bool{} // the queries of src's validation and test pairs
	var splits [3][]Pair
	for x, source := range append([]Source{{Dir: src}}, opt.More...) {
		files, err := goFiles(source.Dir)
		if err != nil {
			if x > 0 && errors.Is(err, fs.ErrNotExist) {
				continue // a package without Go source
			}
			return nil, nil, nil, st, err
		}
		st.Files += len(files)
		parsed := parseAll(ctx, source.Dir, files, opt.Progress)
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, st, err
		}
		prefix := ""
		if source.Name != "" {
			prefix = source.Name + "/"
		}
		for _, f := range parsed {
			switch {
			case f.err != nil:
				if errors.Is(f.err, errGenerated) {
					st.Generated++
				} else if errors.Is(f.err, errParse) {
					st.Unparsable++
				} else {
					return nil, nil, nil, st, f.err
				}
				continue
			}
			pkg := pathDir(f.rel)
			for _, d := range f.decls {
				st.Funcs++
				if d.doc == "" {
					continue
				}
				st.Documented++
				q := QueryFromDoc(d.doc, d.name)
				if len(strings.Fields(q)) < opt.MinWords {
					st.NoQuery++
					continue
				}
				k := key{pkg, d.recv, d.name}
				if seenDecl[k] {
					st.Variants++
					continue
				}
				seenDecl[k] = true
				h := sha256.Sum256([]byte(strings.Join(strings.Fields(d.code), " ")))
				if seenCode[h] {
					st.Duplicates++
					continue
				}
				seenCode[h] = true
				id := pkg + "." + d.name
				if d.recv != "" {
					id = pkg + "." + d.recv + "." + d.name
				}
				s := splitOf(pkg, opt)
				nq := normalQuery(q)
				switch {
				case x == 0 && s > 0:
					heldQuery[nq] = true
				case x > 0 && s == 0 && heldQuery[nq]:
					st.HeldQuery++ // a held-out query of src: not trained on
					continue
				}
				if x > 0 {
					st.More++
				}
				splits[s] = append(splits[s], Pair{ID: id, Query: q, Code: d.code, Package: pkg, File: prefix + f.rel, Line: d.line})
			}
		}
	}
	// src's own training pairs with the query of one of its validation or
	// test pairs (another package's method of the same doc): not trained on
	// either. (More's were dropped as they came: src is read first.)
	kept := splits[0][:0]
	for _, p := range splits[0] {
		if heldQuery[normalQuery(p.Query)] {
			st.HeldQuery++
			continue
		}
		kept = append(kept, p)
	}
	splits[0] = kept

	var words, lines, bytes int
	for s, ps := range splits {
		pkgs := map[string]bool{}
		queries := map[string]int{}
		for _, p := range ps {
			pkgs[p.Package] = true
			queries[p.Query]++
			words += len(strings.Fields(p.Query))
			lines += strings.Count(p.Code, "\n") + 1
			bytes += len(p.Code)
		}
		for _, n := range queries {
			if n > 1 {
				st.SharedQuery += n
			}
		}
		st.Split[s] = SplitStats{Pairs: len(ps), Packages: len(pkgs)}
		st.Kept += len(ps)
	}
	if st.Kept == 0 {
		return nil, nil, nil, st, fmt.Errorf("retrieve: %s: no documented function or method in %d .go files", src, st.Files)
	}
	st.QueryWords = float64(words) / float64(st.Kept)
	st.CodeLines = float64(lines) / float64(st.Kept)
	st.CodeBytes = float64(bytes) / float64(st.Kept)
	return splits[0], splits[1], splits[2], st, nil
}

// splitOf returns 0 (train), 1 (validation) or 2 (test) for a package path.
func splitOf(pkg string, opt Options) int {
	h := fnv.New64a()
	h.Write([]byte(pkg))
	u := float64(h.Sum64()%1_000_000) / 1_000_000
	switch {
	case u < opt.TestFrac:
		return 2
	case u < opt.TestFrac+opt.ValFrac:
		return 1
	}
	return 0
}

// goFiles lists the non-test .go files under root in lexical order, as paths
// relative to root.
func goFiles(root string) ([]string, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("retrieve: %s is not a directory", root)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retrieve: reading %s: %w", root, err)
	}
	return files, nil
}

func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

var (
	errGenerated = errors.New("generated file")
	errParse     = errors.New("does not parse")
)

type funcDecl struct {
	recv, name, doc, code string
	line                  int
	body                  int // offset of the body's opening brace in code
}

type parsedFile struct {
	rel       string
	decls     []funcDecl
	generated bool
	err       error
}

// parseAll parses files on GOMAXPROCS goroutines and returns them in the
// order given, so the pairs kept do not depend on scheduling.
func parseAll(ctx context.Context, root string, files []string, progress func(done, total int)) []parsedFile {
	out := make([]parsedFile, len(files))
	next := make(chan int, 64)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				out[i] = parseFile(root, files[i])
			}
		})
	}
	for i := range files {
		if ctx.Err() != nil {
			break
		}
		next <- i
		if progress != nil && (i+1)%64 == 0 {
			progress(i+1-len(next), len(files)) // files handed out and taken
		}
	}
	close(next)
	wg.Wait()
	if progress != nil {
		progress(len(files), len(files))
	}
	return out
}

func parseFile(root, rel string) parsedFile {
	src, err := readlimit.File(filepath.Join(root, filepath.FromSlash(rel)), readlimit.SourceFileBytes)
	if err != nil {
		return parsedFile{rel: rel, err: fmt.Errorf("retrieve: %w", err)}
	}
	return parseSource(rel, src, false)
}

// parseSource parses one file; a generated file is errGenerated unless
// generated is true.
func parseSource(rel string, src []byte, generated bool) parsedFile {
	pf := parsedFile{rel: rel}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		pf.err = fmt.Errorf("retrieve: %s: %w: %w", rel, errParse, err)
		return pf
	}
	if ast.IsGenerated(f) {
		if !generated {
			pf.err = errGenerated
			return pf
		}
		pf.generated = true
	}
	tf := fset.File(f.Pos())
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Name.Name == "init" || fd.Name.Name == "_" {
			continue
		}
		d := funcDecl{
			name: fd.Name.Name,
			recv: recvName(fd),
			code: string(src[tf.Offset(fd.Pos()):tf.Offset(fd.End())]),
			line: tf.Line(fd.Pos()),
			body: tf.Offset(fd.Body.Lbrace) - tf.Offset(fd.Pos()),
		}
		if fd.Doc != nil {
			d.doc = fd.Doc.Text()
		}
		pf.decls = append(pf.decls, d)
	}
	return pf
}

// recvName returns the receiver's base type name ("Buffer" for
// (b *Buffer) and for (s *Set[T])), or "" for a function.
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// QueryFromDoc turns the text of a doc comment (as ast.CommentGroup.Text
// returns it) into a query for the declaration called name:
//
//   - paragraphs that start with "Deprecated:" are dropped (directives such
//     as //go:noinline are already gone: CommentGroup.Text drops them);
//   - the first remaining paragraph is kept, joined onto one line (the rest
//     of a doc comment is detail, examples and code, which a search query
//     does not contain; CodeSearchNet keeps the first paragraph too);
//   - a leading "Name", "A Name", "An Name" or "The Name" is removed, with
//     the punctuation that follows it: "Foo returns x." → "returns x.";
//     "The Foo function reports…" → "function reports…". A comment that does
//     not start with the name is kept as written.
//
// The result is "" when nothing is left, as for a comment that is only the
// name.
func QueryFromDoc(doc, name string) string {
	var q string
	for p := range strings.SplitSeq(doc, "\n\n") {
		text := strings.Join(strings.Fields(p), " ")
		if text != "" && !strings.HasPrefix(text, "Deprecated:") {
			q = text
			break
		}
	}
	for _, article := range []string{"", "A ", "An ", "The "} {
		if rest, ok := strings.CutPrefix(q, article+name); ok {
			if r, _ := utf8.DecodeRuneInString(rest); rest == "" || !isWordRune(r) {
				q = strings.TrimLeftFunc(rest, func(r rune) bool {
					return unicode.IsSpace(r) || r == ',' || r == ':' || r == '.' || r == ';'
				})
				break
			}
		}
	}
	return q
}

// Packages is the number of packages that gave at least one pair.
func (st Stats) Packages() int {
	n := 0
	for _, s := range st.Split {
		n += s.Packages
	}
	return n
}

// normalQuery is a query compared for duplication: lower case, words only.
func normalQuery(q string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}

// ErrGenerated is returned by FileFunctions for a file marked "Code
// generated … DO NOT EDIT." when generated files are not asked for.
var ErrGenerated = errGenerated

// GoFiles lists the non-test .go files under root in lexical order, as
// slash-separated paths relative to root, skipping testdata, vendor,
// hidden and _-prefixed folders: the files BuildDataset and a search
// index read.
func GoFiles(root string) ([]string, error) { return goFiles(root) }

// A Func is a function or method of a Go file as a search indexes it: its
// pair (the code without the doc comment, which the encoders read), its
// doc comment as a field of its own, and where its body starts. The doc
// never enters a training document: in the pairs of BuildDataset it is
// the query.
type Func struct {
	Pair
	// Doc is the whole doc comment as ast.CommentGroup.Text gives it
	// (directives such as //go:noinline dropped), "" without one.
	Doc string `json:"doc,omitempty"`
	// Body is the byte offset in Code of the body's opening brace:
	// Code[:Body] is the signature (receiver, name, parameters, results).
	Body int `json:"body"`
	// Generated: the function's file is marked "Code generated … DO NOT
	// EDIT.".
	Generated bool `json:"generated,omitempty"`
}

// Name returns the function's name within its package: "Name", or
// "Recv.Name" for a method.
func (f Func) Name() string { return FuncName(f.Pair) }

// PackageOf returns the package folder of a slash-separated file path
// relative to a source root, as the pairs record it ("." for the root).
func PackageOf(rel string) string { return pathDir(rel) }

// FuncName returns the name of a pair's function within its package
// (its ID without the package): "Name", or "Recv.Name" for a method.
func FuncName(p Pair) string {
	if name, ok := strings.CutPrefix(p.ID, p.Package+"."); ok {
		return name
	}
	return p.ID
}

// Signature returns the function's signature: its code up to the body.
func (f Func) Signature() string { return f.Code[:min(max(f.Body, 0), len(f.Code))] }

// BodyText returns the function's body: its code from the opening brace.
func (f Func) BodyText() string { return f.Code[min(max(f.Body, 0), len(f.Code)):] }

// FileFunctions returns the functions and methods with a body (init
// excluded) of the Go file rel with contents src: ID package.Recv.Name,
// Code from the func keyword to the closing brace without the doc comment
// (what the encoders read), Query the doc comment's query (QueryFromDoc;
// "" without one), Doc the whole doc comment, Package, File, Line and
// where the body starts. A file that does not parse is an error wrapping
// the parser's; a generated one is ErrGenerated unless generated is true.
func FileFunctions(rel string, src []byte, generated bool) ([]Func, error) {
	pf := parseSource(rel, src, generated)
	if pf.err != nil {
		return nil, pf.err
	}
	pkg := pathDir(rel)
	out := make([]Func, 0, len(pf.decls))
	for _, d := range pf.decls {
		id := pkg + "." + d.name
		if d.recv != "" {
			id = pkg + "." + d.recv + "." + d.name
		}
		q := ""
		if d.doc != "" {
			q = QueryFromDoc(d.doc, d.name)
		}
		out = append(out, Func{Pair: Pair{ID: id, Query: q, Code: d.code, Package: pkg, File: rel, Line: d.line},
			Doc: strings.TrimSpace(d.doc), Body: d.body, Generated: pf.generated})
	}
	return out, nil
}

// SplitSignature returns the offset in code, the source of one function
// declaration from its func keyword, of its body's opening brace, or
// len(code) when code does not parse as a function with a body.
func SplitSignature(code string) int {
	const head = "package p\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", head+code, parser.SkipObjectResolution)
	if err != nil || len(f.Decls) == 0 {
		return len(code)
	}
	fd, ok := f.Decls[0].(*ast.FuncDecl)
	if !ok || fd.Body == nil {
		return len(code)
	}
	return fset.File(f.Pos()).Offset(fd.Body.Lbrace) - len(head)
}

// useRe finds the replacement a deprecation names: "Deprecated: Use X
// instead", "Deprecated: use [pkg.X]".
var useRe = regexp.MustCompile(`(?is)deprecated:.*?\buse\s+\[?\*?([A-Za-z_][\w.]*)`)

// Deprecations finds, in the Go sources srcs, the functions whose doc
// comment has a "Deprecated:" paragraph naming a replacement in the same
// package ("Deprecated: Use X instead."), and returns them with their
// replacements as (replacement, deprecated) pairs: code, and the query of
// each one's first paragraph.
func Deprecations(ctx context.Context, srcs []Source) ([][2]Pair, error) {
	var out [][2]Pair
	for _, src := range srcs {
		files, err := goFiles(src.Dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		parsed := parseAll(ctx, src.Dir, files, nil)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		type fn struct {
			p   Pair
			doc string
		}
		byPkg := map[string]map[string]fn{}
		for _, f := range parsed {
			if f.err != nil {
				continue
			}
			pkg := pathDir(f.rel)
			if byPkg[pkg] == nil {
				byPkg[pkg] = map[string]fn{}
			}
			for _, d := range f.decls {
				if d.doc == "" || d.recv != "" {
					continue
				}
				byPkg[pkg][d.name] = fn{Pair{ID: pkg + "." + d.name, Query: QueryFromDoc(d.doc, d.name), Code: d.code, Package: pkg, File: f.rel, Line: d.line}, d.doc}
			}
		}
		for _, fns := range byPkg {
			for _, f := range fns {
				m := useRe.FindStringSubmatch(f.doc)
				if m == nil {
					continue
				}
				name := m[1]
				if i := strings.LastIndexByte(name, '.'); i >= 0 {
					name = name[i+1:]
				}
				if r, ok := fns[name]; ok && r.p.ID != f.p.ID && r.p.Query != "" {
					out = append(out, [2]Pair{r.p, f.p})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1].ID < out[j][1].ID })
	return out, nil
}

// HeldOutStats count what WriteHeldOut wrote.
type HeldOutStats struct {
	Files, Packages [3]int // by split; train's stay 0
}

// WriteHeldOut writes the Go files (non-test, as BuildDataset reads them)
// of the validation and test packages of srcs (split by package as
// BuildDataset splits them) into dir/val and dir/test, each source under
// its name (a source without a name under "std"): folders to search,
// where every function is one no training pair came from. Files are
// hard-linked where the file system allows, copied otherwise. The folders
// dir/val and dir/test must not exist.
func WriteHeldOut(ctx context.Context, dir string, srcs []Source, opt Options) (HeldOutStats, error) {
	var st HeldOutStats
	for _, s := range []string{"val", "test"} {
		if _, err := os.Lstat(filepath.Join(dir, s)); err == nil {
			return st, fmt.Errorf("retrieve: %s already exists", filepath.Join(dir, s))
		}
	}
	pkgs := [3]map[string]bool{{}, {}, {}}
	for x, source := range srcs {
		files, err := goFiles(source.Dir)
		if err != nil {
			if x > 0 && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return st, err
		}
		name := source.Name
		if name == "" {
			name = "std"
		}
		for _, rel := range files {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			pkg := pathDir(rel)
			s := splitOf(pkg, opt)
			if s == 0 {
				continue
			}
			to := filepath.Join(dir, SplitNames[s], filepath.FromSlash(name), filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return st, fmt.Errorf("retrieve: %w", err)
			}
			from := filepath.Join(source.Dir, filepath.FromSlash(rel))
			if err := os.Link(from, to); err != nil {
				data, err := readlimit.File(from, readlimit.SourceFileBytes)
				if err != nil {
					return st, fmt.Errorf("retrieve: %w", err)
				}
				if err := os.WriteFile(to, data, 0o644); err != nil {
					return st, fmt.Errorf("retrieve: %w", err)
				}
			}
			st.Files[s]++
			pkgs[s][name+"/"+pkg] = true
		}
	}
	for s := range pkgs {
		st.Packages[s] = len(pkgs[s])
	}
	return st, nil
}
