package corpus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// GoSrc is where a Debian Go package keeps its source, relative to the
// root of the unpacked package.
const GoSrc = "usr/share/gocode/src"

// debMarker, inside an unpacked package, holds the name of the .deb it came
// from, so that the manifest can be rebuilt from the folders alone.
const debMarker = ".attnlab-deb"

// A Runner runs the program name with args in the folder dir and returns
// what it wrote to stdout and stderr. It must stop the program and return
// when ctx is cancelled.
type Runner func(ctx context.Context, dir, name string, args ...string) ([]byte, error)

// Exec is the Runner of Fetch by default: it runs the program with
// LC_ALL=C (so that apt's messages are in English) and, on cancellation,
// kills it together with the processes it started.
func Exec(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	killGroup(cmd)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	return out, err
}

// FetchOptions are the options of Fetch.
type FetchOptions struct {
	// Run runs apt-get and dpkg; nil means Exec.
	Run Runner
	// Progress, when not nil, is called before each package is fetched
	// (Done packages of Total finished) and once at the end (Done == Total,
	// Package empty).
	Progress func(p Progress)
}

// Progress is the state of a fetch.
type Progress struct {
	Package     string // the package about to be fetched
	Done, Total int    // packages finished (fetched or failed) and to fetch in this run
	Failed      int    // of Done, those that failed
}

// Failure is a package that could not be fetched.
type Failure struct {
	Package string
	Err     error // one line: the first error apt-get or dpkg printed
}

// FetchResult says what a fetch did.
type FetchResult struct {
	Fetched []string  // packages fetched by this run, in list order
	Present int       // listed packages already unpacked before this run
	Failed  []Failure // in list order
	Stale   int       // temporaries of an earlier, interrupted fetch removed
	Bytes   int64     // bytes of .go files in the packages fetched by this run
}

// WriteText writes what the fetch into dir did, for a reader, as attnlab
// corpus fetch prints it: the temporaries removed, then that there was
// nothing to do, or the packages fetched, already there and failed, with
// each failure and, when apt knew a package not, what to try. took is the
// time the fetch took; complete says Fetch returned no error.
func (r *FetchResult) WriteText(w io.Writer, dir string, took time.Duration, complete bool) error {
	var b strings.Builder
	if r.Stale > 0 {
		fmt.Fprintf(&b, "removed %d temporaries of an interrupted fetch\n", r.Stale)
	}
	if len(r.Fetched)+len(r.Failed) == 0 && complete {
		fmt.Fprintf(&b, "%s: all %d packages already fetched; nothing to do\n", dir, r.Present)
	} else {
		fmt.Fprintf(&b, "%s: fetched %d packages (%.1f MB of Go source) in %s; %d already there; %d failed\n",
			dir, len(r.Fetched), float64(r.Bytes)/1e6, took.Round(time.Second), r.Present, len(r.Failed))
		unknown := false
		for _, f := range r.Failed {
			fmt.Fprintf(&b, "  %s: %v\n", f.Package, f.Err)
			unknown = unknown || strings.Contains(f.Err.Error(), "Unable to locate")
		}
		if unknown {
			b.WriteString("apt does not know some packages: check the names, or run apt-get update and fetch again\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Manifest records the unpacked packages of a corpus folder.
type Manifest struct {
	Packages map[string]Package `json:"packages"`
}

// Package is one unpacked package of a manifest.
type Package struct {
	Version string `json:"version"`  // Debian version, from the .deb's name ("" when unknown)
	Deb     string `json:"deb"`      // the .deb file it was unpacked from
	GoFiles int    `json:"go_files"` // .go files under usr/share/gocode/src, tests included
	GoBytes int64  `json:"go_bytes"` // their bytes
}

// Fetch makes dir hold every package of list unpacked, as described in the
// package documentation: it downloads each package not yet in dir/pkgs with
// "apt-get download NAME" and unpacks it with "dpkg -x". A package that
// cannot be fetched (apt does not know it, the download fails) is recorded
// in the result's Failed list and the fetch goes on; Fetch returns an error
// only when no listed package is in dir at the end, when dir cannot be
// used, or when ctx is cancelled (the error then wraps ctx.Err(); the
// packages finished so far are kept, and the next call resumes). dir must
// be missing, empty or a corpus folder; only one fetch may run on a folder
// at a time.
func Fetch(ctx context.Context, list []string, dir string, opt FetchOptions) (*FetchResult, error) {
	for _, name := range list {
		if !ValidName(name) {
			return nil, fmt.Errorf("corpus: %q is not a Debian package name", name)
		}
	}
	if len(list) == 0 {
		return nil, errors.New("corpus: no package to fetch")
	}
	run := opt.Run
	if run == nil {
		run = Exec
	}
	if err := checkCorpusDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "pkgs"), 0o755); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	lock, err := atomicfile.Lock(dir)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer lock.Unlock()

	res := &FetchResult{}
	if res.Stale, err = removeStale(dir); err != nil {
		return nil, err
	}
	man, err := syncManifest(dir)
	if err != nil {
		return nil, err
	}
	var todo []string
	for _, name := range list {
		if _, ok := man.Packages[name]; ok {
			res.Present++
		} else {
			todo = append(todo, name)
		}
	}
	progress := func(name string, done int) {
		if opt.Progress != nil {
			opt.Progress(Progress{Package: name, Done: done, Total: len(todo), Failed: len(res.Failed)})
		}
	}
	for i, name := range todo {
		if ctx.Err() != nil {
			break
		}
		progress(name, i)
		p, err := fetchOne(ctx, run, dir, name)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			res.Failed = append(res.Failed, Failure{name, err})
			continue
		}
		man.Packages[name] = p
		if err := writeManifest(dir, man); err != nil {
			return res, err
		}
		res.Fetched = append(res.Fetched, name)
		res.Bytes += p.GoBytes
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("corpus: fetch interrupted after %d of %d packages (run again to resume): %w",
			len(res.Fetched)+len(res.Failed), len(todo), err)
	}
	progress("", len(todo))
	if len(res.Fetched)+res.Present == 0 {
		return res, fmt.Errorf("corpus: none of the %d packages could be fetched; the first: %s: %v",
			len(list), res.Failed[0].Package, res.Failed[0].Err)
	}
	return res, nil
}

// checkCorpusDir refuses a dir that is a file, or a non-empty folder that
// is not a corpus folder: a fetch must not mix packages into other files.
func checkCorpusDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("corpus: %s is a file, not a folder", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "pkgs" || e.Name() == "manifest.json" {
			return nil
		}
	}
	if len(entries) > 0 {
		return fmt.Errorf("corpus: %s is a non-empty folder that is not a corpus folder (no pkgs/ or manifest.json)", dir)
	}
	return nil
}

// removeStale removes what interrupted fetches left (a package being
// unpacked, a manifest being written: only atomicfile's temporaries) and
// returns how many.
func removeStale(dir string) (int, error) {
	n := 0
	for _, d := range []string{dir, filepath.Join(dir, "pkgs")} {
		did, err := atomicfile.RecoverIn(d)
		n += len(did)
		if err != nil {
			return n, fmt.Errorf("corpus: removing a stale temporary: %w", err)
		}
	}
	return n, nil
}

// fetchOne downloads and unpacks one package into dir/pkgs/name, whole
// (atomicfile.ReplaceDir): the .deb is downloaded into a folder of its own
// inside the new package folder and removed before the swap.
func fetchOne(ctx context.Context, run Runner, dir, name string) (p Package, err error) {
	err = atomicfile.ReplaceDir(filepath.Join(dir, "pkgs", name), func(root string) error {
		download := filepath.Join(root, ".download")
		if err := os.Mkdir(download, 0o755); err != nil {
			return err
		}
		os.Chmod(root, 0o755) // apt downloads as user _apt when it can reach the folder
		if out, err := run(ctx, download, "apt-get", "download", name); err != nil {
			return commandError("apt-get download", out, err)
		}
		debs, _ := filepath.Glob(filepath.Join(download, "*.deb"))
		if len(debs) != 1 {
			return fmt.Errorf("apt-get download left %d .deb files, want 1", len(debs))
		}
		if out, err := run(ctx, download, "dpkg", "-x", debs[0], root); err != nil {
			return commandError("dpkg -x", out, err)
		}
		deb := filepath.Base(debs[0])
		if err := os.RemoveAll(download); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, debMarker), []byte(deb+"\n"), 0o644); err != nil {
			return err
		}
		p, err = describe(root, deb)
		return err
	})
	return p, err
}

// commandError is a one-line error from a command's output: its first line
// starting with "E:" or "dpkg", else its exit error.
func commandError(what string, out []byte, err error) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "dpkg") {
			return fmt.Errorf("%s: %s", what, line)
		}
	}
	return fmt.Errorf("%s: %v", what, err)
}

// describe counts the Go source of an unpacked package and reads its
// version from the .deb's name (NAME_VERSION_ARCH.deb, ':' written %3a).
func describe(root, deb string) (Package, error) {
	p := Package{Deb: deb}
	if parts := strings.Split(strings.TrimSuffix(deb, ".deb"), "_"); len(parts) == 3 {
		p.Version, _ = url.PathUnescape(parts[1])
	}
	err := filepath.WalkDir(filepath.Join(root, GoSrc), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == filepath.Join(root, GoSrc) {
			return fs.SkipAll // a package without Go source
		}
		if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".go") {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		p.GoFiles++
		p.GoBytes += fi.Size()
		return nil
	})
	return p, err
}

// syncManifest reads dir/manifest.json and brings it in line with the
// folders of dir/pkgs, which are the record of what is done: an entry
// without its folder is dropped, a folder without an entry (a fetch killed
// between the rename and the manifest's write) is described again. An
// unreadable manifest is rebuilt the same way.
func syncManifest(dir string) (*Manifest, error) {
	man := &Manifest{}
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		json.Unmarshal(b, man) // a damaged manifest is rebuilt below
	}
	if man.Packages == nil {
		man.Packages = map[string]Package{}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "pkgs"))
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	changed := false
	have := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !ValidName(name) {
			continue
		}
		have[name] = true
		if _, ok := man.Packages[name]; ok {
			continue
		}
		deb, _ := os.ReadFile(filepath.Join(dir, "pkgs", name, debMarker))
		p, err := describe(filepath.Join(dir, "pkgs", name), strings.TrimSpace(string(deb)))
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		man.Packages[name], changed = p, true
	}
	for name := range man.Packages {
		if !have[name] {
			delete(man.Packages, name)
			changed = true
		}
	}
	if changed {
		if err := writeManifest(dir, man); err != nil {
			return nil, err
		}
	}
	return man, nil
}

func writeManifest(dir string, man *Manifest) error {
	b, err := json.MarshalIndent(man, "", "  ") // map keys in sorted order
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("corpus: writing the manifest: %w", err)
	}
	return nil
}
