package server

import (
	"testing"

	"github.com/nephio-project/ipam/service/server/authz"
)

// TestCallerName: an authenticated caller is its first name; an
// anonymous one its IPv4 address or the /64 of its IPv6 address, so that
// the addresses of one IPv6 host are one caller.
func TestCallerName(t *testing.T) {
	cert := authz.Principal{Names: []string{"uri:spiffe://example.org/a", "cn:a", "token:ci"}}
	anonymous := authz.Principal{Names: []string{authz.Anonymous}}
	for _, tc := range []struct {
		pr   authz.Principal
		addr string
		want string
	}{
		{cert, "192.0.2.1:5000", "uri:spiffe://example.org/a"},
		{authz.Principal{Names: []string{"token:ci"}}, "192.0.2.1:5000", "token:ci"},
		{authz.Principal{}, "192.0.2.1:5000", "anonymous from 192.0.2.1"},
		{anonymous, "192.0.2.1:6000", "anonymous from 192.0.2.1"},
		{anonymous, "[::ffff:192.0.2.1]:6000", "anonymous from 192.0.2.1"},
		{anonymous, "[2001:db8:1:2::1]:443", "anonymous from 2001:db8:1:2::/64"},
		{anonymous, "[2001:db8:1:2:ffff:ffff:ffff:ffff]:443", "anonymous from 2001:db8:1:2::/64"},
		{anonymous, "[2001:db8:1:3::1]:443", "anonymous from 2001:db8:1:3::/64"},
		{anonymous, "[fe80::1%eth0]:443", "anonymous from fe80::/64"},
		{anonymous, "@", "anonymous from @"},
	} {
		if got := callerName(tc.pr, tc.addr); got != tc.want {
			t.Errorf("callerName(%v, %q) = %q, want %q", tc.pr.Names, tc.addr, got, tc.want)
		}
	}
}
