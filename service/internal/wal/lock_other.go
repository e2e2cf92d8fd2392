//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package wal

import (
	"errors"
	"os"
)

// lockFile fails: this platform has no flock(2), and running without a lock
// would let two servers share a data directory.
func lockFile(*os.File) error {
	return errors.New("directory locking is not supported on this platform")
}
