package wal_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nephio-project/ipam/service/internal/wal"
)

// A log is opened, replayed, appended to with group commit, and opened
// again: every batch whose Wait returned nil is replayed in order.
func ExampleLog() {
	dir, _ := os.MkdirTemp("", "wal-example-")
	defer os.RemoveAll(dir)
	opts := wal.Options{Logger: slog.New(slog.DiscardHandler)}

	l, err := wal.Open(dir, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	nothing := func(io.Reader) error { return nil }
	if err := l.Replay(nothing, func([]byte) error { return nil }); err != nil {
		fmt.Println(err)
		return
	}
	p1 := l.Enqueue([]byte("allocate a"), []byte("allocate b")) // one batch: both or neither
	p2 := l.Enqueue([]byte("release a"))
	fmt.Println(p1.Wait(), p2.Wait(), p2.Seq())
	l.Close()

	l, _ = wal.Open(dir, opts)
	defer l.Close()
	_ = l.Replay(nothing, func(payload []byte) error {
		fmt.Println(string(payload))
		return nil
	})
	// Output:
	// <nil> <nil> 2
	// allocate a
	// allocate b
	// release a
}
