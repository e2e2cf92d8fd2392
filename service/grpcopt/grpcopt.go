// Package grpcopt holds the gRPC transport settings that ipam-server and
// its clients (ipam-fn, ipam-injector, the controllers, ipamctl) share, so
// that both ends of every connection agree on them.
//
// Flow control is static on both ends. gRPC's default, dynamic window
// sizing, estimates the bandwidth-delay product by sending a PING (with a
// connection WINDOW_UPDATE) after each burst of data it receives, which
// the peer answers. A connection that carries one small call at a time,
// as most IPAM clients do, pays for that with one more write system call
// on each side per call, the most expensive thing a loopback or LAN call
// does: with 64 clients on a connection each, an Allocate took 3.8 socket
// writes (client and server together) with dynamic windows and 2.0 with
// static ones. The static windows are
// large enough that a 64 MiB Sync is not throttled: 8 MiB in flight per
// call is 160 MB/s at a 50 ms round trip.
package grpcopt

import "google.golang.org/grpc"

// MaxMsgSize is the largest message either end accepts (64 MiB): a Sync of
// ipam.MaxSyncItems allocations, and its answer, fit with room to spare.
const MaxMsgSize = 64 << 20

// StreamWindow and ConnWindow are the static HTTP/2 flow-control windows
// of one call and of one connection.
const (
	StreamWindow = 8 << 20
	ConnWindow   = 16 << 20
)

// StreamWorkers is the number of goroutines that serve calls and are reused
// between them (more concurrent calls get goroutines of their own). Reused
// goroutines keep their grown stacks: a fresh goroutine per call spends a
// tenth of the call growing its stack. A durable call holds its goroutine
// while it waits for an fsync, so there are enough for well over 64
// concurrent calls (with 32, 64 clients allocated 10-15% slower).
const StreamWorkers = 128

// MaxConcurrentStreams bounds the calls in flight at once on one
// connection to ipam-server (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a
// client at the limit waits for one of its calls to end before it starts
// another, so that one connection cannot make the server hold more
// handlers, goroutines and stream buffers than that. The project's
// busiest connection carries 64 calls at once; its Watch streams are
// capped much lower by ipam-server itself.
const MaxConcurrentStreams = 1024

// ServerOptions returns the transport options of ipam-server.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMsgSize),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.StaticStreamWindowSize(StreamWindow),
		grpc.StaticConnWindowSize(ConnWindow),
	}
}

// DialOptions returns the transport options of a client of ipam-server;
// the caller adds its credentials.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)),
		grpc.WithStaticStreamWindowSize(StreamWindow),
		grpc.WithStaticConnWindowSize(ConnWindow),
	}
}
