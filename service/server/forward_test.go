package server

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// TestAdvertiseAddr: the address other replicas forward changes to is
// --advertise-addr when set (and must be host:port), else the listener's
// address, else, when it listens on every address, an interface address
// with the listener's port.
func TestAdvertiseAddr(t *testing.T) {
	loopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer loopback.Close()
	all, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	allPort := all.Addr().(*net.TCPAddr).Port

	for _, tc := range []struct {
		name      string
		advertise string
		lis       net.Listener
		check     func(string) bool
		wantErr   string
	}{
		{"explicit", "ipam-0.ipam:9090", all, func(a string) bool { return a == "ipam-0.ipam:9090" }, ""},
		{"explicit without a port", "ipam-0", all, nil, `--advertise-addr "ipam-0"`},
		{"the listen address", "", loopback, func(a string) bool { return a == loopback.Addr().String() }, ""},
		{"every address: an interface's", "", all, func(a string) bool {
			ap, err := netip.ParseAddrPort(a)
			return err == nil && int(ap.Port()) == allPort && !ap.Addr().IsUnspecified() && !ap.Addr().IsLoopback()
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := advertiseAddr(tc.advertise, tc.lis)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("advertiseAddr: %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				if strings.Contains(err.Error(), "no network interface address") {
					t.Skip("this machine has no non-loopback interface address")
				}
				t.Fatal(err)
			}
			if !tc.check(got) {
				t.Fatalf("advertiseAddr = %q", got)
			}
		})
	}
}
