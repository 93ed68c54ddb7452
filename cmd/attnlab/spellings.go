package main

import (
	"flag"
	"fmt"
	"strings"
)

// One name per idea across commands. Where two commands once spelled one
// idea two ways, the older spelling still works and prints a one-line
// note on stderr naming the new one:
//
//	-dtype f32, f64, bf16, f16 (convert)    → float32, float64, bfloat16, float16
//	-depth (search, retriever rerank)       → -rerank-depth
//	-ckpt-every (train)                     → -save-every
//	-dir (corpus stats)                     → -corpus
//	-data FILE (retriever eval)             → -pairs FILE (-data is a folder)

// deprecated prints the note of an old spelling.
func deprecated(old, now string) {
	fmt.Fprintf(progressOut, "attnlab: %s is deprecated: use %s\n", old, now)
}

// alias is a flag's old name: setting it sets the flag and prints the
// deprecation note.
type alias struct {
	flag.Value
	old, now string
}

func (a alias) Set(s string) error {
	deprecated("-"+a.old, "-"+a.now)
	return a.Value.Set(s)
}

// String is the value's; the flag package also calls it on a zero alias
// (to tell a default from the zero value in -h), which has none.
func (a alias) String() string {
	if a.Value == nil {
		return ""
	}
	return a.Value.String()
}

func (a alias) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// oldName defines old as a deprecated spelling of the flag now of fs.
func oldName(fs *flag.FlagSet, old, now string) {
	f := fs.Lookup(now)
	if f == nil {
		panic("attnlab: oldName of an undefined flag -" + now)
	}
	fs.Var(alias{f.Value, old, now}, old, "deprecated: -"+now)
}

// givenFlags returns the names of the flags set on the command line,
// an old spelling counted as the flag it names.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if a, ok := f.Value.(alias); ok {
			given[a.now] = true
		}
	})
	return given
}

// dtypeNames are the names of the floating-point dtypes, as PyTorch spells
// them (torch.float32, …).
var dtypeNames = []string{"float32", "float64", "bfloat16", "float16"}

// oldDTypes are the short names convert once took.
var oldDTypes = map[string]string{"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16"}

// dtypeName returns the name of dtype v among allowed (dtypeNames when
// nil), accepting the old short names with a note, or a usage error
// naming the flag.
func dtypeName(v string, allowed ...string) (string, error) {
	if allowed == nil {
		allowed = dtypeNames
	}
	name := strings.ToLower(v)
	if now, ok := oldDTypes[name]; ok {
		deprecated("-dtype "+v, "-dtype "+now)
		name = now
	}
	for _, a := range allowed {
		if name == a {
			return name, nil
		}
	}
	return "", usagef("-dtype %q: want %s", v, orList(allowed))
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
