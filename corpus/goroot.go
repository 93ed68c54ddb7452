package corpus

import (
	"os/exec"
	"runtime"
	"strings"
)

// GoRoot is the Go installation whose standard library Std reads by
// default: the go command's GOROOT, or the one this program was built
// with when there is no go command.
func GoRoot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	return runtime.GOROOT()
}
