// Command ggml-masked-row runs masked_row.c, the reproduction of
// docs/findings/ggml-masked-row.md: one query row with every key masked
// gives 0 through ggml_flash_attn_ext and NaN through mul_mat →
// soft_max_ext → mul_mat. It exits 1 while the two disagree.
package main

// #cgo CFLAGS: -DMASKED_ROW_NO_MAIN
// int masked_row(void);
import "C"

import (
	"fmt"
	"os"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
)

func main() {
	fmt.Println(ggml.Version())
	os.Stdout.Sync()
	os.Exit(int(C.masked_row()))
}
