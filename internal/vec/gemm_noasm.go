//go:build !amd64 || purego

package vec

func kernel32() *gemmKernel[float32] { return &genericKernel32 }

func kernel64() *gemmKernel[float64] { return &genericKernel64 }
