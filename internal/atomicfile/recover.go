package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Recover tidies what interrupted writes of path left beside it, and
// returns what it did, a line each (nothing when there was nothing to do):
//
//   - a folder swap killed between its renames leaves path missing and two
//     complete copies under temporary names: the new copy (marked complete)
//     is renamed into place, or, when there is none, the old copy is put
//     back;
//   - a folder completed and marked but not yet swapped in replaces what is
//     at path when that is still what it was built to replace (the mark
//     records its identity); a path changed since is newer and kept;
//   - the rest (an unfinished file or folder, a copy moved aside, a mark
//     without its folder) is removed.
//
// Temporaries locked by a live process (a write in progress) are left
// alone, and so is everything of path while one is. The caller holds
// path's Lock, so no other process of ours swaps it meanwhile.
func Recover(path string) ([]string, error) {
	parent, base := split(path)
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var mine []temp
	for _, e := range entries {
		if t, ok := parseTemp(e.Name()); ok && t.base == base {
			mine = append(mine, t)
		}
	}
	return recoverBase(parent, base, mine)
}

// RecoverIn is Recover for every file and folder of dir that interrupted
// writes left temporaries of: for a folder the caller owns (a run folder,
// a cache), whose contents are the caller's results. A missing dir holds
// nothing.
func RecoverIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byBase := map[string][]temp{}
	var bases []string
	for _, e := range entries {
		if t, ok := parseTemp(e.Name()); ok {
			if byBase[t.base] == nil {
				bases = append(bases, t.base)
			}
			byBase[t.base] = append(byBase[t.base], t)
		}
	}
	var did []string
	for _, base := range bases {
		d, err := recoverBase(dir, base, byBase[base])
		did = append(did, d...)
		if err != nil {
			return did, err
		}
	}
	return did, nil
}

func recoverBase(parent, base string, ts []temp) ([]string, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	path := filepath.Join(parent, base)
	// a write in progress: hands off
	for _, t := range ts {
		if t.kind != kindDone && inUse(filepath.Join(parent, t.name)) {
			return nil, nil
		}
	}
	var did []string
	gone := map[string]bool{}
	remove := func(t temp, why string) error {
		if gone[t.name] {
			return nil
		}
		gone[t.name] = true
		if err := os.RemoveAll(filepath.Join(parent, t.name)); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(parent, t.name), err)
		}
		did = append(did, fmt.Sprintf("removed %s (%s)", filepath.Join(parent, t.name), why))
		return nil
	}
	marks := map[string]temp{}
	for _, t := range ts {
		if t.kind == kindDone {
			marks[t.id] = t
		}
	}
	// the newest complete new folder, if any (ReadDir lists by name, so
	// among copies of one time the last, of the largest id, wins)
	var best temp
	var bestTime int64
	var bestReplaces string
	for _, t := range ts {
		m, ok := marks[t.id]
		if t.kind != kindNew || !ok {
			continue
		}
		when, replaces, err := readMark(filepath.Join(parent, m.name))
		if err == nil && (best.name == "" || when >= bestTime) {
			best, bestTime, bestReplaces = t, when, replaces
		}
	}
	cur, curErr := os.Lstat(path)
	missing := errors.Is(curErr, fs.ErrNotExist)
	if curErr != nil && !missing {
		return nil, fmt.Errorf("recover %s: %w", path, curErr)
	}
	if best.name != "" && (missing || identity(cur) == bestReplaces) {
		// the swap had begun: finish it
		if !missing {
			aside := filepath.Join(parent, tempName(base, kindOld, newID()))
			if err := os.Rename(path, aside); err != nil {
				return did, fmt.Errorf("recover %s: %w", path, err)
			}
			step("recover:aside")
			ts = append(ts, temp{name: filepath.Base(aside), base: base, kind: kindOld})
		}
		if err := os.Rename(filepath.Join(parent, best.name), path); err != nil {
			return did, fmt.Errorf("recover %s: %w", path, err)
		}
		syncDir(parent)
		step("recover:in")
		did = append(did, fmt.Sprintf("restored %s from the complete copy an interrupted save left", path))
		if err := os.Remove(filepath.Join(parent, marks[best.id].name)); err != nil {
			return did, err
		}
		step("recover:unmarked")
		ts = slices.DeleteFunc(ts, func(t temp) bool { return t.id == best.id })
	} else if missing {
		// no complete new copy: the newest copy moved aside goes back
		var back temp
		var backTime int64
		for _, t := range ts {
			if t.kind != kindOld {
				continue
			}
			fi, err := os.Lstat(filepath.Join(parent, t.name))
			if err != nil {
				continue
			}
			if when := fi.ModTime().UnixNano(); back.name == "" || when >= backTime {
				back, backTime = t, when
			}
		}
		if back.name != "" {
			if err := os.Rename(filepath.Join(parent, back.name), path); err != nil {
				return did, fmt.Errorf("recover %s: %w", path, err)
			}
			syncDir(parent)
			did = append(did, fmt.Sprintf("restored %s from the copy an interrupted save had moved aside", path))
			ts = slices.DeleteFunc(ts, func(t temp) bool { return t.name == back.name })
		}
	}
	// what is left goes; a copy's mark before the copy, so that a kill in
	// the middle of its removal never leaves half a copy marked complete
	for _, t := range ts {
		if m, ok := marks[t.id]; ok && t.kind == kindNew {
			if err := remove(m, "the mark of a copy no longer there"); err != nil {
				return did, err
			}
		}
		why := map[string]string{
			kindFile: "an interrupted write",
			kindNew:  "an unfinished or superseded copy",
			kindDone: "the mark of a copy no longer there",
			kindOld:  "a copy a save had moved aside",
		}[t.kind]
		if err := remove(t, why); err != nil {
			return did, err
		}
	}
	return did, nil
}

// inUse reports whether a process holds the lock of the temporary file or
// folder at path (a write in progress).
func inUse(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return lockFile(f, false) == errWouldBlock
}
