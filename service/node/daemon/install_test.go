package daemon

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListen: the socket's directory is created, a stale socket removed,
// any other file at the path refused, the socket made 0600.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a", "b", "daemon.sock")
	stale, err := net.Listen("unix", filepath.Join(dir, "stale.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bind, err string
	}{
		{"new directory", "unix://" + sock, ""},
		{"stale socket", "unix://" + filepath.Join(dir, "stale.sock"), ""},
		{"regular file", "unix://" + filepath.Join(dir, "file"), "is not a socket"},
		{"relative", "unix://rel.sock", "absolute path"},
		{"scheme", "http://x", "unix:///path or tcp://host:port"},
		{"tcp", "tcp://127.0.0.1:0", ""},
		{"tcp no port", "tcp://127.0.0.1", "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := listen(tc.bind)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			if path, ok := strings.CutPrefix(tc.bind, "unix://"); ok {
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("socket mode: %v %v", fi.Mode(), err)
				}
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "file")); string(data) != "keep" {
		t.Fatal("the regular file was touched")
	}
}

// TestInstallCNI: the plugin is copied executable and nv-ipam.conf holds
// NVIDIA's keys; the skip flags skip.
func TestInstallCNI(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "plugin")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := CNIConfig{BinDir: filepath.Join(dir, "bin"), ConfDir: filepath.Join(dir, "conf"), BinFile: src,
		DaemonSocket: "unix:///run/x.sock", CallTimeout: 7, LogFile: "/var/log/x.log", LogLevel: "debug", ForcePoolName: true}
	if err := os.MkdirAll(c.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := InstallCNI(c); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(c.BinDir, PluginName))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("plugin: %v %v", fi, err)
	}
	data, err := os.ReadFile(filepath.Join(c.ConfDir, CNIConfFile))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"daemonSocket": "unix:///run/x.sock", "daemonCallTimeoutSeconds": 7.0, "logFile": "/var/log/x.log", "logLevel": "debug", "forcePoolName": true}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %v, want %v (%s)", k, got[k], v, data)
		}
	}
	entries, _ := os.ReadDir(c.BinDir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	skip := CNIConfig{BinDir: filepath.Join(dir, "none"), ConfDir: filepath.Join(dir, "none"), BinFile: "/nope", SkipBinCopy: true, SkipConfCreate: true}
	if err := InstallCNI(skip); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Fatal("skipped install wrote")
	}
	c.BinFile = filepath.Join(dir, "missing")
	if err := InstallCNI(c); err == nil || !strings.Contains(err.Error(), "copy the nv-ipam plugin") {
		t.Fatalf("missing plugin: %v", err)
	}
}

func TestConfigCheck(t *testing.T) {
	ok := func() Config {
		var c Config
		c.NodeName, c.PoolsNamespace, c.StoreFile, c.BindAddress = "n", "kube-system", "/s", DefaultBindAddress
		c.CleanupInterval, c.CNI.CallTimeout, c.CNI.LogLevel = DefaultCleanupInterval, 5, "info"
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		err  string
	}{
		{"ok", func(*Config) {}, ""},
		{"no node", func(c *Config) { c.NodeName = "" }, "--node-name"},
		{"bad level", func(c *Config) { c.CNI.LogLevel = "loud" }, "--cni-log-level"},
		{"bad bind", func(c *Config) { c.BindAddress = "/x" }, "--bind-address"},
		{"zero interval", func(c *Config) { c.CleanupInterval = 0 }, "--cleanup-interval"},
		{"zero timeout", func(c *Config) { c.CNI.CallTimeout = 0 }, "--cni-daemon-call-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.mod(&c)
			err := c.Check()
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}
