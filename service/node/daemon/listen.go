package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// parseBindAddress splits unix:///path or tcp://host:port.
func parseBindAddress(s string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		addr = strings.TrimPrefix(s, "unix://")
		if !filepath.IsAbs(addr) {
			return "", "", fmt.Errorf("--bind-address %q: a unix socket needs an absolute path (unix:///path)", s)
		}
		return "unix", addr, nil
	case strings.HasPrefix(s, "tcp://"):
		addr = strings.TrimPrefix(s, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("--bind-address %q: %w", s, err)
		}
		return "tcp", addr, nil
	}
	return "", "", fmt.Errorf("--bind-address %q: unix:///path or tcp://host:port", s)
}

// listen listens on a bind address. A unix socket's directory is created;
// a stale socket is removed (only a socket: any other file is refused);
// the socket is made 0600.
func listen(bind string) (net.Listener, error) {
	network, addr, err := parseBindAddress(bind)
	if err != nil {
		return nil, err
	}
	if network == "tcp" {
		return net.Listen("tcp", addr)
	}
	if err := os.MkdirAll(filepath.Dir(addr), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(addr); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; not removing it", addr)
		}
		if err := os.Remove(addr); err != nil {
			return nil, fmt.Errorf("stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", addr)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(addr, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}
