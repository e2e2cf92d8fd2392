//go:build !linux

package wal

import "os"

// fdatasync is a full fsync where the platform's fdatasync is not used.
func fdatasync(f *os.File) error { return f.Sync() }
