package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ErrLocked is wrapped by the error of Lock for a path another process
// holds.
var ErrLocked = errors.New("in use")

// LockedError is the error of Lock for a path another process holds.
type LockedError struct {
	Path string
	PID  int // the holder's process id, 0 when it could not be read
}

func (e *LockedError) Error() string {
	who := "another attnlab process"
	if e.PID == os.Getpid() {
		who = "another task of this process"
	} else if e.PID > 0 {
		who += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("%s is being written by %s: wait for it to end, or stop it", e.Path, who)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// A PathLock is an exclusive lock on a path that a process writes: a lock
// file beside it (".NAME.attnlab-lock-CHECK") locked with flock, which the
// kernel releases when the process ends, however it ends, and which holds
// the holder's process id for the refusal of the next one.
type PathLock struct {
	key string
	f   *os.File
}

var locks = struct {
	sync.Mutex
	held map[string]*PathLock
}{held: map[string]*PathLock{}}

// Lock takes the exclusive lock on path, or returns a *LockedError naming
// the process that holds it (this one, too: a path has one writer at a
// time). The folder path lies in must exist; a missing one is said as
// such.
func Lock(path string) (*PathLock, error) {
	parent, base := split(path)
	real, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return nil, pathError("lock", path, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, err
	}
	name := filepath.Join(real, lockName(base))
	locks.Lock()
	defer locks.Unlock()
	if locks.held[name] != nil {
		return nil, &LockedError{Path: path, PID: os.Getpid()}
	}
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, pathError("lock", path, err)
		}
		step("lock:opened")
		if err := lockFile(f, false); err != nil {
			pid := readPID(f)
			f.Close()
			if err == errWouldBlock {
				return nil, &LockedError{Path: path, PID: pid}
			}
			return nil, pathError("lock", path, err)
		}
		// the holder before us may have removed the file between our open
		// and our lock: then we locked a file no one else can find
		// (SameFile is false when the path is gone: cur is nil)
		fi, err := f.Stat()
		cur, _ := os.Stat(name)
		if err != nil || !os.SameFile(fi, cur) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		l := &PathLock{key: name, f: f}
		locks.held[name] = l
		return l, nil
	}
}

// Unlock releases the lock: it removes the lock file, then closes it. A
// nil lock, or one released already, is a no-op.
func (l *PathLock) Unlock() {
	if l == nil {
		return
	}
	locks.Lock()
	defer locks.Unlock()
	if locks.held[l.key] != l {
		return
	}
	delete(locks.held, l.key)
	os.Remove(l.key) // while locked: the next holder locks a new file
	l.f.Close()
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}

// lockName is the name of path's lock file.
func lockName(base string) string {
	return "." + base + ".attnlab-lock-" + check(base, "lock", "")
}

// parseLockName returns the base of a lock file's name.
func parseLockName(name string) (string, bool) {
	const mid = ".attnlab-lock-"
	i := strings.LastIndex(name, mid)
	if i <= 0 {
		return "", false
	}
	base := name[1:i]
	return base, base != "" && name == lockName(base)
}

// lockDir opens and locks the folder at path (a temporary being built, or
// the copy about to be moved aside), so that Recover in another process
// leaves it alone; closing the file releases it.
func lockDir(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, true); err != nil && !errors.Is(err, errUnsupported) {
		f.Close()
		return nil, err
	}
	return f, nil
}

var (
	errWouldBlock  = errors.New("would block")
	errUnsupported = errors.New("locks are not supported here")
)

// saves counts the saves in progress in this process.
var saves = struct {
	sync.Mutex
	cond *sync.Cond
	n    int
}{}

func init() { saves.cond = sync.NewCond(&saves.Mutex) }

// Saving marks a save in progress until the returned function is called:
// Write and ReplaceDir mark their own, and a caller marks a save made of
// several (a checkpoint with its curves), or a loop that will save when
// interrupted. WaitSaves waits for them.
func Saving() (done func()) {
	saves.Lock()
	saves.n++
	saves.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			saves.Lock()
			saves.n--
			saves.Unlock()
			saves.cond.Broadcast()
		})
	}
}

// SavesInProgress returns how many saves are marked in progress.
func SavesInProgress() int {
	saves.Lock()
	defer saves.Unlock()
	return saves.n
}

// WaitSaves returns once no save is in progress: a command told to stop a
// second time calls it before it exits, so a second signal never cuts a
// save in half.
func WaitSaves() {
	saves.Lock()
	for saves.n > 0 {
		saves.cond.Wait()
	}
	saves.Unlock()
}
