//go:build !unix

package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
)

// lockFile: file locks are not used on this platform; Lock then excludes
// only the holds of this process.
func lockFile(f *os.File, wait bool) error { return nil }

// identity names the file fi is of as well as this platform allows.
func identity(fi fs.FileInfo) string {
	return fmt.Sprintf("t%d-%d", fi.ModTime().UnixNano(), fi.Size())
}
