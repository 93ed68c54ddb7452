package atomicfile

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The kinds of temporaries, the last element of their names.
const (
	kindFile = "tmp"  // a file being written
	kindNew  = "new"  // a folder being built, or built and not yet swapped in
	kindDone = "done" // the mark that the folder of the same id is complete
	kindOld  = "old"  // a folder moved aside by a swap, to be removed
)

// infix separates a temporary's target name from its id and check.
const infix = ".attnlab-"

// tempName is the name of a temporary of kind for the file or folder base:
// ".BASE.attnlab-ID-CHECK.KIND", where ID is random and CHECK is a hash of
// the kind, base and id, so a name is ours only if its check is right.
func tempName(base, kind, id string) string {
	return "." + base + infix + id + "-" + check(base, kind, id) + "." + kind
}

// newID returns 12 random hex digits.
func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// check returns the 8 hex digits that prove a temporary's name was made by
// tempName.
func check(base, kind, id string) string {
	h := sha256.Sum256([]byte("attnlab atomicfile\x00" + kind + "\x00" + base + "\x00" + id))
	return hex.EncodeToString(h[:4])
}

// temp is a parsed temporary's name.
type temp struct {
	name, base, kind, id string
}

// parseTemp parses a name made by tempName; ok is false for any other
// name, however alike.
func parseTemp(name string) (t temp, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return t, false
	}
	// the infix's own dot is not the kind's: a valid kind puts dot past it
	dot := strings.LastIndexByte(name, '.')
	i := strings.LastIndex(name, infix)
	if i <= 0 {
		return t, false
	}
	t = temp{name: name, base: name[1:i], kind: name[dot+1:]}
	switch t.kind {
	case kindFile, kindNew, kindDone, kindOld:
	default:
		return t, false
	}
	idCheck := name[i+len(infix) : dot]
	if len(idCheck) != 12+1+8 || idCheck[12] != '-' || t.base == "" {
		return t, false
	}
	t.id = idCheck[:12]
	if !isHex(t.id) || idCheck[13:] != check(t.base, t.kind, t.id) {
		return t, false
	}
	return t, true
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// IsTemporary reports whether name is that of a temporary file or folder
// made by this package (or of a lock file of Lock), for a reader that
// lists a folder: a name a user gave never is.
func IsTemporary(name string) bool {
	if _, ok := parseTemp(name); ok {
		return true
	}
	_, ok := parseLockName(name)
	return ok
}
