package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/client"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestDialOptions: each setting that cannot be used is an OptionError
// naming it, and tokens travel only over TLS or to loopback addresses.
func TestDialOptions(t *testing.T) {
	dir := t.TempDir()
	certs := servertest.WriteCerts(t, dir)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := file("token", "s3cret\n")
	for _, tc := range []struct {
		name    string
		cfg     client.Config
		opt     client.Option
		wantErr string
	}{
		{"plaintext", client.Config{Server: "127.0.0.1:9090"}, "", ""},
		{"no server", client.Config{}, client.OptServer, "required"},
		{"missing CA", client.Config{Server: "h:1", CA: filepath.Join(dir, "none.pem")}, client.OptCA, "no such file"},
		{"CA not PEM", client.Config{Server: "h:1", CA: file("not.pem", "hello")}, client.OptCA, "no PEM certificate"},
		{"cert without key", client.Config{Server: "h:1", CA: certs.CA, Cert: certs.ClientCert}, client.OptCert, "go together"},
		{"mTLS", client.Config{Server: "h:1", CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}, "", ""},
		{"cert without CA uses the system roots", client.Config{Server: "h:1", Cert: certs.ClientCert, Key: certs.ClientKey}, "", ""},
		{"token to loopback", client.Config{Server: "127.0.0.1:9090", TokenFile: token}, "", ""},
		{"token to localhost", client.Config{Server: "localhost:9090", TokenFile: token}, "", ""},
		{"token over TLS", client.Config{Server: "ipam.example:9090", CA: certs.CA, TokenFile: token}, "", ""},
		{"token over plaintext to a remote host", client.Config{Server: "10.0.0.1:9090", TokenFile: token}, client.OptToken, "only over TLS"},
		{"missing token file", client.Config{Server: "127.0.0.1:1", TokenFile: filepath.Join(dir, "none")}, client.OptToken, "no such file"},
		{"empty token", client.Config{Server: "127.0.0.1:1", TokenFile: file("empty", " \n")}, client.OptToken, "is empty"},
		{"token with a space", client.Config{Server: "127.0.0.1:1", TokenFile: file("space", "a b")}, client.OptToken, "cannot have"},
		{"huge token", client.Config{Server: "127.0.0.1:1", TokenFile: file("huge", strings.Repeat("x", client.MaxTokenSize+1))}, client.OptToken, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.DialOptions(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *client.OptionError
			if !errors.As(err, &oe) || oe.Option != tc.opt || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want an OptionError on %s containing %q", err, tc.opt, tc.wantErr)
			}
		})
	}
}
