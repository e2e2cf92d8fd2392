// Package doctest runs the walk-throughs of the project's READMEs: every
// command of their fenced blocks, exactly as printed, from a fresh copy of
// the repository, and compares the output a transcript prints with what the
// command prints. The tests live in its _test.go files; this package has no
// code of its own.
package doctest
