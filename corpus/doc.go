// Package corpus builds the Go training corpus of the language model: the
// standard library and a fixed list of Debian Go source packages, fetched
// with apt-get and unpacked with dpkg into a cache folder.
//
// # Fetching
//
// [ReadList] reads a package list (one Debian package name a line; '#'
// comments and blank lines ignored). [Fetch] downloads and unpacks each
// listed package that the cache folder does not hold yet:
//
//	dir/manifest.json          package → version, .deb file, Go files and bytes
//	dir/pkgs/NAME/usr/...      the unpacked package (dpkg -x)
//	dir/.tmp-NAME-*            a fetch in progress
//
// A package is unpacked into a temporary folder and renamed into
// dir/pkgs/NAME only when whole, so an interrupted fetch never leaves a
// half-unpacked package that counts as done; the temporaries of a killed
// fetch are removed by the next one. The folder holding pkgs/NAME is the
// record that a package is done: the manifest is rebuilt from it when it
// is missing or out of date. A second fetch of the same list does nothing.
//
// # Reading
//
// A [Source] is a folder of import paths: the standard library's
// $GOROOT/src ([Std]) or a Debian package's usr/share/gocode/src
// ([Debian]). [Walk] and [Read] go through the sources in the order given,
// and each source's files in lexical order, and keep the non-test .go files
// that are neither generated ([Generated]), nor under vendor-like folders
// (vendor, third_party, thirdparty, Godeps), testdata or hidden and
// underscore folders, nor larger than [Options.MaxFileBytes] (data
// tables). A file whose content, up to trailing white space, equals a file
// kept before is dropped as a duplicate: the first copy in the order wins,
// so with the standard library first, a Debian package's copy of a standard
// package adds nothing. [Stats] counts what was kept and what was skipped,
// by reason.
//
// # Held-out split
//
// A document's [Document.Unit] is the import path of its folder ("net/http",
// "github.com/BurntSushi/toml"), without the source it came from. [HeldOut]
// puts a unit in the held-out set when a hash of it falls in the first frac
// of the range, the rule of train.Split, so whole packages are held out,
// the split does not depend on which other packages are present, and the
// same import path shipped by two Debian packages (two versions of one
// library) or by Debian and the standard library lands on one side only:
// a near-copy in training would otherwise flatter the held-out measure.
package corpus
