//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package wal

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f without blocking; it returns
// ErrLocked when another open file description holds it. The kernel drops
// the lock when f is closed or the process dies.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
