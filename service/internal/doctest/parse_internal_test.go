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
		{`networkinstance.ipam.nephio.org/vpc-1   True   True     2m3s`, `networkinstance.ipam.nephio.org/vpc-1   True   True     <age>`},
		{`default    pool1  vpc-1  pool  10.1.0.0/16  -  ipamctl  nephio.org/prefix-length=16`, `default    pool1  vpc-1  pool  10.1.0.0/16  -  ipamctl  nephio.org/prefix-length=16`},
		{`10.0.0.0/8     aggregate  default/aggregate0    demo     65792/16777216  0.4%`, `10.0.0.0/8     aggregate  default/aggregate0    demo     65792/16777216  0.4%`},
	} {
		if got := normalize([]string{tc.in})[0]; got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
