// Package memlimit checks sizes before they are allocated: a product of
// sizes from a flag or a file computed without overflow, and an estimate
// of the bytes a job needs held against the memory this process may still
// use, with a one-line error naming what asked for it.
//
// The memory available is, on Linux, MemAvailable of /proc/meminfo,
// lowered to what the process's cgroup limit (v2 memory.max or v1
// memory.limit_in_bytes) leaves; where neither can be read, it is
// Fallback. Estimates below Small are not checked.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Fallback is the memory assumed available where it cannot be read.
const Fallback = 16 << 30

// Small is the estimate below which Check does not read the machine's
// memory: any machine that runs attnlab has this much.
const Small = 64 << 20

// Mul returns the product of sizes, or math.MaxInt when it overflows: a
// saturated product is larger than any memory, so the checks after it
// refuse it. It panics on a negative size (the caller validates signs
// first).
func Mul(sizes ...int) int {
	p := 1
	for _, n := range sizes {
		if n < 0 {
			panic(fmt.Sprintf("memlimit: negative size %d", n))
		}
		if n == 0 {
			return 0
		}
	}
	for _, n := range sizes {
		if p > math.MaxInt/n {
			return math.MaxInt
		}
		p *= n
	}
	return p
}

// Add returns the sum of terms, or math.MaxInt when it overflows. It
// panics on a negative term.
func Add(terms ...int) int {
	s := 0
	for _, n := range terms {
		if n < 0 {
			panic(fmt.Sprintf("memlimit: negative size %d", n))
		}
		if s > math.MaxInt-n {
			return math.MaxInt
		}
		s += n
	}
	return s
}

// available is Available's source, replaced by tests.
var available = readAvailable

// Available returns the bytes of memory this process may still use, and
// whether they were measured (false: the machine's memory could not be
// read, and the bytes are Fallback).
func Available() (bytes int, measured bool) { return available() }

// Check returns nil when need bytes fit in the memory available, else an
// error "WHAT needs 380 GB of OF; this machine has 22 GB available". what
// names the sizes that asked for it (the flags or fields with their
// values), of says what the bytes hold ("activations").
func Check(what string, need int, of string) error {
	if need <= Small {
		return nil
	}
	avail, measured := Available()
	if need <= avail {
		return nil
	}
	if !measured {
		return fmt.Errorf("%s needs %s of %s; the limit is %s where the machine's memory cannot be read", what, Format(need), of, Format(avail))
	}
	return fmt.Errorf("%s needs %s of %s; this machine has %s available", what, Format(need), of, Format(avail))
}

// Format writes n bytes in decimal units: "512 B", "1.5 GB", "380 GB"; a
// saturated count (math.MaxInt) is "more than 9 EB".
func Format(n int) string {
	if n == math.MaxInt {
		return "more than 9 EB"
	}
	units := []string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	v, u := float64(n), 0
	for v >= 1000 && u < len(units)-1 {
		v, u = v/1000, u+1
	}
	if u == 0 || v >= 9.95 {
		return fmt.Sprintf("%.0f %s", v, units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// readAvailable reads MemAvailable and the cgroup's room.
func readAvailable() (int, bool) {
	avail, ok := memAvailable("/proc/meminfo")
	if !ok {
		return Fallback, false
	}
	if room, ok := cgroupRoom("/proc/self/cgroup", "/sys/fs/cgroup"); ok && room < avail {
		avail = room
	}
	return avail, true
}

// memAvailable returns MemAvailable of a /proc/meminfo file, in bytes.
func memAvailable(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb < 0 {
				return 0, false
			}
			return clamp(kb, 1024), true
		}
	}
	return 0, false
}

// cgroupRoom returns what the memory limit of the process's cgroup leaves
// (limit − usage), false when there is no limit or it cannot be read. self
// is /proc/self/cgroup, root the cgroup file system's mount point.
func cgroupRoom(self, root string) (int, bool) {
	data, err := os.ReadFile(self)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			for _, dir := range []string{filepath.Join(root, parts[2]), root} {
				if room, ok := room(filepath.Join(dir, "memory.max"), filepath.Join(dir, "memory.current")); ok {
					return room, true
				}
			}
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			for _, dir := range []string{filepath.Join(root, "memory", parts[2]), filepath.Join(root, "memory")} {
				if room, ok := room(filepath.Join(dir, "memory.limit_in_bytes"), filepath.Join(dir, "memory.usage_in_bytes")); ok {
					return room, true
				}
			}
		}
	}
	return 0, false
}

// room returns limit − usage from two files of one number each; false
// when the limit is "max", absurdly large (v1 writes a page-rounded
// MaxInt64 for none) or unreadable.
func room(limitFile, usageFile string) (int, bool) {
	limit, ok := readNumber(limitFile)
	if !ok || limit >= 1<<60 {
		return 0, false
	}
	usage, ok := readNumber(usageFile)
	if !ok {
		return 0, false
	}
	return clamp(max(limit-usage, 0), 1), true
}

func readNumber(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil && n >= 0
}

// clamp returns n·unit as an int, math.MaxInt when it does not fit.
func clamp(n, unit int64) int {
	if n > math.MaxInt64/unit || n*unit > math.MaxInt {
		return math.MaxInt
	}
	return int(n * unit)
}
