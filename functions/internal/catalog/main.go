// Command catalog writes the kpt function catalog entry of a version of
// ipam-fn, the metadata.yaml users pin: the image ipam-fn:<version> and the
// source and example package at that version's Git ref. make catalog runs
// it with git describe's version, the tag make images gives the image and
// make build bakes into ipam-fn --version:
//
//	go run ./functions/internal/catalog --version v0.1.0 --out bin/release
//
// writes bin/release/ipam-fn/v0.1.0/metadata.yaml and prints its path.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nephio-project/ipam/functions/ipamfn"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "catalog:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the version, the image tag of ipam-fn (required)")
	out := fs.String("out", "bin/release", "the directory the entry is written under")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	path, err := Write(*out, *version)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, path)
	return err
}

// Write writes the catalog entry of version into
// <out>/ipam-fn/<version>/metadata.yaml and returns its path.
func Write(out, version string) (string, error) {
	data, err := ipamfn.CatalogMetadata(version)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, "ipam-fn", version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write the catalog entry: %w", err)
	}
	path := filepath.Join(dir, "metadata.yaml")
	// Write aside and rename: a reader never sees half a file.
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return "", fmt.Errorf("write the catalog entry: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return "", fmt.Errorf("write the catalog entry: %w", err)
	}
	return path, nil
}
