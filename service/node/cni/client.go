package cni

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// maxResponseBytes caps what the plugin reads of one daemon answer.
const maxResponseBytes = 64 << 10

// DialTarget turns a daemonSocket address into a gRPC target:
// unix:///abs/path stays as it is, tcp://host:port becomes
// passthrough:///host:port (no name resolution beyond the dialer's).
func DialTarget(addr string) (string, error) {
	if len(addr) > maxSocketLen {
		return "", fmt.Errorf("%d characters, at most %d", len(addr), maxSocketLen)
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not unix:///path or tcp://host:port", addr)
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || u.Path == "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("%q: want unix:///absolute/path", addr)
		}
		return "unix://" + u.Path, nil
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", fmt.Errorf("%q: want tcp://host:port", addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is not 1 to 65535", addr, port)
		}
		return "passthrough:///" + u.Host, nil
	default:
		return "", fmt.Errorf("%q: want unix:///path or tcp://host:port", addr)
	}
}

// Dial returns a client connection to the daemon at addr (a daemonSocket
// address). It does not connect: the first call does, and fails with
// codes.Unavailable when nothing listens.
func Dial(addr string) (*grpc.ClientConn, error) {
	target, err := DialTarget(addr)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponseBytes)))
	if err != nil {
		return nil, fmt.Errorf("daemon client for %s: %w", addr, err)
	}
	return conn, nil
}
