//go:build linux

package wal

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes the data of f, and only the metadata needed to read it
// back, to stable storage: no journal commit when f's size and blocks are
// unchanged, as they are while the log writes into its zero-filled tail.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
