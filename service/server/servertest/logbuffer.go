package servertest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log destination that a server, a store or a child
// process writes while the test reads it. The zero value is ready.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times s was written so far (strings.Count).
func (l *LogBuffer) Count(s string) int {
	return strings.Count(l.String(), s)
}
