package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestWebBeyondLoopback: the web view is refused on an address beyond
// loopback without TLS and without a policy, unless WebInsecure says so
// (then the server warns); on loopback, or with TLS or a policy, it
// starts as before.
func TestWebBeyondLoopback(t *testing.T) {
	certs := servertest.WriteCerts(t, t.TempDir())
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	must(t, os.WriteFile(policy, []byte("apiVersion: ipam.nephio.org/v1alpha1\nkind: AuthorizationPolicy\nrules:\n- identities: [\"*\"]\n  read: true\n"), 0o600))
	const refused = "is not a loopback address, and without --tls-cert or --authz-policy the web view would show every owner's objects to anyone who reaches it, in plaintext"
	for _, tc := range []struct {
		name    string
		cfg     server.Config
		refused bool
		warns   bool
	}{
		{"every address", server.Config{WebAddr: "0.0.0.0:0"}, true, false},
		{"every address, no host", server.Config{WebAddr: ":0"}, true, false},
		{"a host name", server.Config{WebAddr: "ipam.example:0"}, true, false},
		{"every address, --web-insecure", server.Config{WebAddr: "0.0.0.0:0", WebInsecure: true}, false, true},
		{"every address with TLS", server.Config{WebAddr: "0.0.0.0:0", TLSCert: certs.ServerCert, TLSKey: certs.ServerKey}, false, false},
		{"every address with a policy", server.Config{WebAddr: "0.0.0.0:0", AuthzPolicy: policy}, false, false},
		{"127.0.0.1", server.Config{WebAddr: "127.0.0.1:0"}, false, false},
		{"::1", server.Config{WebAddr: "[::1]:0"}, false, false},
		{"localhost", server.Config{WebAddr: "localhost:0"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.refused {
				tc.cfg.Store, tc.cfg.Listen, tc.cfg.LogOutput = "memory", "127.0.0.1:0", io.Discard
				// (Bounded, so that a server that starts anyway ends the test.)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := server.Run(ctx, tc.cfg)
				if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "--web-insecure") {
					t.Fatalf("Run = %v, want a refusal saying %q and naming --web-insecure", err, refused)
				}
				return
			}
			if strings.HasPrefix(tc.cfg.WebAddr, "[::1]") {
				if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
					t.Skip("no IPv6 loopback")
				} else {
					_ = l.Close()
				}
			}
			var logs servertest.LogBuffer
			tc.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			ts := servertest.Start(t, tc.cfg, false)
			if tc.cfg.TLSCert != "" {
				ts.Dial(t, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientTLS(t, false))))
			}
			if got := strings.Contains(logs.String(), "--web-insecure"); got != tc.warns {
				t.Errorf("warning about --web-insecure logged: %v, want %v\n%s", got, tc.warns, logs.String())
			}
			if tc.warns {
				// It serves the view (on every address).
				m := regexp.MustCompile(`msg=web addr=\S*:(\d+)`).FindStringSubmatch(logs.String())
				if m == nil {
					t.Fatalf("no web address logged:\n%s", logs.String())
				}
				resp, err := http.Get("http://127.0.0.1:" + m[1] + "/")
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET / = %s", resp.Status)
				}
			}
		})
	}
}
