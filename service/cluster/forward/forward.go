// Package forward relays TCP connections accepted in one network namespace
// to an address reached from another: netns-forward's logic.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Config says where Run listens and where it connects.
type Config struct {
	// Listen is the loopback host:port to accept on, in the caller's
	// network namespace.
	Listen string
	// Netns is the path of the network namespace to connect from.
	Netns string
	// To is the host:port to connect to from inside Netns.
	To string
}

// Run accepts connections on cfg.Listen until ctx ends, and relays each to
// cfg.To, connected from inside cfg.Netns. It refuses a non-loopback
// listen address: the forwarder must not open the namespace to the
// machine's network.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	ap, err := netip.ParseAddrPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	if !ap.Addr().IsLoopback() {
		return fmt.Errorf("--listen %q: not a loopback address", cfg.Listen)
	}
	if cfg.To == "" || cfg.Netns == "" {
		return errors.New("--netns and --to are required")
	}
	d, err := newDialer(cfg.Netns)
	if err != nil {
		return err
	}
	defer d.close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	log.Info("forwarding", "listen", ln.Addr().String(), "netns", cfg.Netns, "to", cfg.To)
	go func() { <-ctx.Done(); _ = ln.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			relay(ctx, c, d, cfg.To, log)
		}()
	}
}

func relay(ctx context.Context, c net.Conn, d *dialer, to string, log *slog.Logger) {
	defer func() { _ = c.Close() }()
	up, err := d.dial(to)
	if err != nil {
		log.Warn("connect", "to", to, "err", err)
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

// dialer connects from inside a network namespace: a goroutine locked to
// an OS thread that joined the namespace creates every socket (a socket
// stays in the namespace it was made in).
type dialer struct {
	reqs chan dialReq
}

type dialReq struct {
	to    string
	reply chan dialRes
}

type dialRes struct {
	conn net.Conn
	err  error
}

func newDialer(path string) (*dialer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--netns: %w", err)
	}
	d := &dialer{reqs: make(chan dialReq)}
	ready := make(chan error, 1)
	go func() {
		// The thread stays in the namespace: it is never unlocked, so
		// the runtime ends it with the goroutine.
		runtime.LockOSThread()
		err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		_ = f.Close()
		ready <- err
		if err != nil {
			return
		}
		for r := range d.reqs {
			c, err := net.DialTimeout("tcp", r.to, 10*time.Second)
			r.reply <- dialRes{c, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("join network namespace %s: %w", path, err)
	}
	return d, nil
}

func (d *dialer) dial(to string) (net.Conn, error) {
	r := dialReq{to: to, reply: make(chan dialRes, 1)}
	d.reqs <- r
	res := <-r.reply
	return res.conn, res.err
}

func (d *dialer) close() { close(d.reqs) }
