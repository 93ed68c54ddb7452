package train

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
)

// Fingerprint returns a hash (hex SHA-256) of lists of token sequences,
// their lengths and their order: the identity of a run's training data,
// recorded in its state so that -resume refuses other data of the same
// size.
func Fingerprint(lists ...[][]int) string {
	h := sha256.New()
	var b [8]byte
	put := func(v int) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	for _, l := range lists {
		put(len(l))
		for _, s := range l {
			put(len(s))
			for _, v := range s {
				put(v)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Saved is what -resume checks of a saved run against the run the command
// is about to continue.
type Saved struct {
	File string // the state file, for the errors

	Step, Steps int // the saved step, and the steps of the run
	Epoch, Next int // the data cursor
	Items       int // windows or pairs the run was trained on
	What        string

	// Data is the saved fingerprint of the training data ("" in states
	// written before fingerprints were: not checked); DataNow this run's.
	Data, DataNow string
	// Options are the saved and the current options, of one struct type
	// whose fields carry the flag that sets them (`flag:"lr"`).
	Options, OptionsNow any
	ItemsNow            int
}

// Check returns an error naming the state file and what differs, or what
// in the saved state cannot be, or nil.
func (s Saved) Check() error {
	if diffs := DiffOptions(s.Options, s.OptionsNow); len(diffs) > 0 {
		return fmt.Errorf("%s: the run was trained with other options (%s): resume with the run's own flags, or -force starts over",
			s.File, strings.Join(diffs, "; "))
	}
	switch {
	case s.Items != s.ItemsNow:
		return fmt.Errorf("%s: the run was trained on %d %s, this data has %d: resume on the run's own data, or -force starts over",
			s.File, s.Items, s.What, s.ItemsNow)
	case s.Data != "" && s.Data != s.DataNow:
		return fmt.Errorf("%s: the run was trained on other %s (%d of them, as here, but not these): resume on the run's own data, or -force starts over",
			s.File, s.What, s.Items)
	case s.Step < 0 || s.Step > s.Steps:
		return fmt.Errorf("%s: saved step %d is not one of the run's steps 0…%d: the state is damaged", s.File, s.Step, s.Steps)
	case s.Epoch < 0 || s.Next < 0 || s.Next > s.Items:
		return fmt.Errorf("%s: data cursor epoch %d, next %d of %d %s: the state is damaged", s.File, s.Epoch, s.Next, s.Items, s.What)
	}
	return nil
}

// DiffOptions lists the fields in which two values of one struct type
// differ, each as "-flag SAVED (now NOW)" by the field's flag tag (or its
// Go name), once per flag.
func DiffOptions(saved, now any) []string {
	var diffs []string
	seen := map[string]bool{}
	var walk func(a, b reflect.Value, path string)
	walk = func(a, b reflect.Value, path string) {
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			x, y := a.Field(i), b.Field(i)
			name := path + f.Name
			if x.Kind() == reflect.Struct {
				walk(x, y, name+".")
				continue
			}
			if x.Equal(y) {
				continue
			}
			if flag := f.Tag.Get("flag"); flag != "" {
				name = "-" + flag
			}
			if !seen[name] {
				seen[name] = true
				diffs = append(diffs, fmt.Sprintf("%s %v (now %v)", name, x.Interface(), y.Interface()))
			}
		}
	}
	a, b := reflect.ValueOf(saved), reflect.ValueOf(now)
	if a.Type() != b.Type() || a.Kind() != reflect.Struct {
		panic(fmt.Sprintf("train: DiffOptions of %T and %T", saved, now))
	}
	walk(a, b, "")
	return diffs
}
