package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMul(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want int
	}{
		{nil, 1},
		{[]int{3, 4, 5}, 60},
		{[]int{1 << 20, 1 << 20, 1 << 20}, 1 << 60},
		{[]int{1 << 32, 1 << 32}, math.MaxInt},           // overflows
		{[]int{1e9, 1e9, 1e9, 0}, 0},                     // a zero anywhere
		{[]int{math.MaxInt, 2}, math.MaxInt},             // saturated stays saturated
		{[]int{1e9, 1e9, 4}, 4e18},                       // just fits
		{[]int{1e9, 1e9, 10}, math.MaxInt},               // just does not
		{[]int{math.MaxInt / 3, 3}, math.MaxInt / 3 * 3}, // exact
		{[]int{math.MaxInt/3 + 1, 3}, math.MaxInt},       // one past
	} {
		if got := Mul(c.in...); got != c.want {
			t.Errorf("Mul(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestAdd(t *testing.T) {
	if got := Add(1, 2, 3); got != 6 {
		t.Errorf("Add(1, 2, 3) = %d", got)
	}
	if got := Add(math.MaxInt-1, 2); got != math.MaxInt {
		t.Errorf("Add overflowing = %d, want MaxInt", got)
	}
	if got := Add(math.MaxInt, math.MaxInt); got != math.MaxInt {
		t.Errorf("Add(MaxInt, MaxInt) = %d", got)
	}
}

func TestNegativePanics(t *testing.T) {
	for name, f := range map[string]func(){"Mul": func() { Mul(3, -1) }, "Add": func() { Add(-1) }} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "memlimit: ") {
					t.Errorf("%s of a negative: recovered %v, want a memlimit panic", name, r)
				}
			}()
			f()
		}()
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int]string{
		0: "0 B", 999: "999 B", 1000: "1.0 KB", 1500: "1.5 KB", 22e9: "22 GB", 380e9: "380 GB",
		9_999_999: "10 MB", 1.2e12: "1.2 TB", math.MaxInt: "more than 9 EB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

// fake makes Available return bytes for the test.
func fake(t *testing.T, bytes int, measured bool) {
	old := available
	available = func() (int, bool) { return bytes, measured }
	t.Cleanup(func() { available = old })
}

func TestCheck(t *testing.T) {
	fake(t, 22e9, true)
	if err := Check("-batch 8", 21e9, "activations"); err != nil {
		t.Errorf("21 GB of 22: %v", err)
	}
	err := Check("-batch 100000000 × -window 256", 380e9, "activations")
	want := "-batch 100000000 × -window 256 needs 380 GB of activations; this machine has 22 GB available"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	fake(t, 0, true) // below Small nothing is read or refused
	if err := Check("x", Small, "y"); err != nil {
		t.Errorf("Small bytes refused: %v", err)
	}
	fake(t, Fallback, false)
	if err := Check("x", math.MaxInt, "weights"); err == nil || !strings.Contains(err.Error(), "more than 9 EB of weights; the limit is 17 GB where") {
		t.Errorf("unmeasured: %v", err)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMemAvailable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "meminfo")
	write(t, p, "MemTotal:       24683584 kB\nMemFree:         1000 kB\nMemAvailable:   22000000 kB\n")
	if got, ok := memAvailable(p); !ok || got != 22000000*1024 {
		t.Errorf("memAvailable = %d, %v", got, ok)
	}
	write(t, p, "MemTotal:       24683584 kB\n") // an old kernel
	if _, ok := memAvailable(p); ok {
		t.Error("no MemAvailable line read as one")
	}
	if _, ok := memAvailable(filepath.Join(dir, "none")); ok {
		t.Error("a missing file read")
	}
}

func TestCgroupRoom(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(root, "self")
	// v2, the limit in the process's own cgroup
	write(t, self, "0::/job\n")
	write(t, filepath.Join(root, "job", "memory.max"), "8000000000\n")
	write(t, filepath.Join(root, "job", "memory.current"), "3000000000\n")
	if got, ok := cgroupRoom(self, root); !ok || got != 5e9 {
		t.Errorf("v2: %d, %v; want 5e9", got, ok)
	}
	write(t, filepath.Join(root, "job", "memory.max"), "max\n")
	if _, ok := cgroupRoom(self, root); ok {
		t.Error(`v2 "max" read as a limit`)
	}
	// v1, where the mount shows the cgroup at its root; no limit is a
	// page-rounded MaxInt64
	write(t, self, "9:name=systemd:/\n4:memory:/process_api/x\n0::/\n")
	write(t, filepath.Join(root, "memory", "memory.limit_in_bytes"), "9223372036854771712\n")
	write(t, filepath.Join(root, "memory", "memory.usage_in_bytes"), "496803840\n")
	if _, ok := cgroupRoom(self, root); ok {
		t.Error("v1 without a limit read as one")
	}
	write(t, filepath.Join(root, "memory", "memory.limit_in_bytes"), "1000000000\n")
	if got, ok := cgroupRoom(self, root); !ok || got != 1e9-496803840 {
		t.Errorf("v1: %d, %v", got, ok)
	}
}

func TestAvailableOnThisMachine(t *testing.T) {
	n, measured := Available()
	if n <= 0 {
		t.Fatalf("Available() = %d, %v", n, measured)
	}
	if _, err := os.Stat("/proc/meminfo"); err == nil && !measured {
		t.Error("/proc/meminfo exists but was not read")
	}
	t.Logf("available: %s (measured %v)", Format(n), measured)
}
