package cni

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// maxLogFileBytes is the size past which the log file is moved to
// <logFile>.1 (replacing an older one) when the plugin starts.
const maxLogFileBytes = 50 << 20

// Levels of NVIDIA's logLevel names, on slog's scale.
const (
	levelVerbose = slog.LevelDebug - 4
	levelPanic   = slog.LevelError + 4
)

// parseLevel maps a logLevel name (checked by LoadConfig) to a slog level.
func parseLevel(name string) slog.Level {
	switch strings.ToLower(name) {
	case "verbose":
		return levelVerbose
	case "debug":
		return slog.LevelDebug
	case "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	case "panic":
		return levelPanic
	default:
		return slog.LevelInfo
	}
}

// OpenLog opens the log file (creating its directory) and returns a logger
// at level with a closer. The plugin never logs to stdout: stdout carries
// the result. When the file cannot be opened the logger writes to stderr,
// after one line saying why: a log that cannot be written does not fail the
// command.
func OpenLog(file, level string, stderr io.Writer) (*slog.Logger, func()) {
	opts := &slog.HandlerOptions{Level: parseLevel(level), ReplaceAttr: levelName}
	f, err := openLogFile(file)
	if err != nil {
		l := slog.New(slog.NewJSONHandler(stderr, opts))
		l.Warn("nv-ipam: log file cannot be opened, logging to stderr", "logFile", file, "error", err.Error())
		return l, func() {}
	}
	return slog.New(slog.NewJSONHandler(f, opts)).With("pid", os.Getpid()), func() { _ = f.Close() }
}

func openLogFile(file string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, fmt.Errorf("create the log directory: %w", err)
	}
	if st, err := os.Stat(file); err == nil && st.Mode().IsRegular() && st.Size() > maxLogFileBytes {
		_ = os.Rename(file, file+".1")
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the log file: %w", err)
	}
	return f, nil
}

// levelName writes NVIDIA's names for the levels slog has none for.
func levelName(_ []string, a slog.Attr) slog.Attr {
	if a.Key != slog.LevelKey {
		return a
	}
	switch lvl, _ := a.Value.Any().(slog.Level); lvl {
	case levelVerbose:
		return slog.String(slog.LevelKey, "VERBOSE")
	case levelPanic:
		return slog.String(slog.LevelKey, "PANIC")
	}
	return a
}
