//go:build !linux

package hugepage

func advise([]byte) bool { return false }
