package doctest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSteps: which fenced blocks run and how each splits into commands —
// scripts line by line (here-documents and continuations joined, comments
// skipped), transcripts at their "$ " prompts with the output under each,
// and output or yaml blocks not run.
func TestSteps(t *testing.T) {
	dir := t.TempDir()
	md := "# Title\n\n## Run\n\n" +
		"```\nmake build\nbin/ipam-server --listen 127.0.0.1:9091 &\n# a comment\ncat <<EOF | kubectl apply -f -\nkind: X\nEOF\n```\n\n" +
		"```\nNAME   AGE\nx      1s\n```\n\n" +
		"```yaml\nkind: Y\n```\n\n" +
		"## Tour\n\n" +
		"```console\n$ bin/ipamctl vrf list\nNAME\nvpc-1\n\n$ bin/ipamctl tree vpc-1\n```\n\n" +
		"```\n$ echo a \\\n  b\na b\n```\n\n" +
		"```sh\nfoo --bar\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "R.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := steps(dir, "R.md", "/usr/bin:/bin")
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{file: "R.md", line: 6, section: "Run", cmd: "make build"},
		{file: "R.md", line: 7, section: "Run", cmd: "bin/ipam-server --listen 127.0.0.1:9091 &"},
		{file: "R.md", line: 9, section: "Run", cmd: "cat <<EOF | kubectl apply -f -\nkind: X\nEOF"},
		{file: "R.md", line: 26, section: "Tour", cmd: "bin/ipamctl vrf list", want: []string{"NAME", "vpc-1"}, checked: true},
		{file: "R.md", line: 30, section: "Tour", cmd: "bin/ipamctl tree vpc-1", want: []string{}, checked: true},
		{file: "R.md", line: 34, section: "Tour", cmd: "echo a \\\n  b", want: []string{"a b"}, checked: true},
		{file: "R.md", line: 40, section: "Tour", cmd: "foo --bar"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps:\n got %+v\nwant %+v", got, want)
	}
}

// TestNormalize: only the listed varying parts are rewritten.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"time":"2026-11-24T15:36:43.153Z","msg":"restored","duration":"548µs"}`, `{"time":"<time>","msg":"restored","duration":"<duration>"}`},
		{`{"msg":"ready","restore_duration":"1.5ms"}`, `{"msg":"ready","restore_duration":"<duration>"}`},
		{`go build -ldflags='-X github.com/nephio-project/ipam/service/fronts/ctl.Version=daad2ad-dirty' -o bin/`, `go build -ldflags='-X github.com/nephio-project/ipam/service/fronts/ctl.Version=<version>' -o bin/`},
		{`go build -ldflags='-X github.com/nephio-project/ipam/service/fronts/ctl.Version=v0.3.0-1-gdaad2ad -X github.com/nephio-project/ipam/functions/ipamfn.Version=v0.3.0-1-gdaad2ad' -o bin/`, `go build -ldflags='-X github.com/nephio-project/ipam/service/fronts/ctl.Version=<version> -X github.com/nephio-project/ipam/functions/ipamfn.Version=<version>' -o bin/`},
		{`networkinstance.ipam.nephio.org/vpc-1   True   True     2m3s`, `networkinstance.ipam.nephio.org/vpc-1   True   True     <age>`},
		{`[PASS] "/home/me/ipam/bin/ipam-fn" in 100ms`, `[PASS] "/home/me/ipam/bin/ipam-fn" in <duration>`},
		{`[PASS] "/home/me/ipam/bin/ipam-fn" in 0s`, `[PASS] "/home/me/ipam/bin/ipam-fn" in <duration>`},
		{`default    pool1  vpc-1  pool  10.1.0.0/16  -  ipamctl  nephio.org/prefix-length=16`, `default    pool1  vpc-1  pool  10.1.0.0/16  -  ipamctl  nephio.org/prefix-length=16`},
		{`10.0.0.0/8     aggregate  default/aggregate0    demo     65792/16777216  0.4%`, `10.0.0.0/8     aggregate  default/aggregate0    demo     65792/16777216  0.4%`},
	} {
		if got := normalize([]string{tc.in})[0]; got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMatch: a transcript's "..." stands for any run of lines, none
// included; every other line must be there, in order.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		want, got []string
		ok        bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "b"}, []string{"a", "c"}, false},
		{[]string{"a", "..."}, []string{"a"}, true},
		{[]string{"a", "...", "d"}, []string{"a", "b", "c", "d"}, true},
		{[]string{"a", "...", "d"}, []string{"a", "b", "c"}, false},
		{[]string{"...", "x", "...", "y"}, []string{"x", "q", "y"}, true},
		{[]string{"...", "y", "x"}, []string{"x", "y"}, false},
		{[]string{"a"}, []string{"a", "b"}, false},
	} {
		if got := match(tc.want, tc.got); got != tc.ok {
			t.Errorf("match(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
}

// TestListenAddr: where a server command of a walk-through listens, so
// that replicas on other addresses run side by side.
func TestListenAddr(t *testing.T) {
	for c, want := range map[string]string{
		"bin/ipam-server --listen 127.0.0.1:9091 --store etcd &":                                 "127.0.0.1:9091",
		"bin/k8s/etcd --name m0 --listen-client-urls http://127.0.0.1:20379 --log-level error &": "127.0.0.1:20379",
		"bin/ipam-controller --kubeconfig ~/.kube/config --server 127.0.0.1:9091 &":              "",
	} {
		if got := listenAddr(c); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", c, got, want)
		}
	}
}
