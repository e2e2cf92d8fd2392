// Package doctest runs the walk-throughs of the project's READMEs: every
// command of their fenced blocks, exactly as printed, from a fresh copy of
// the repository (bin/ first on PATH), and compares the output a
// transcript prints with what the command prints.
//
// How a README's fenced block is read:
//
//   - ```console: a transcript. Each "$ " line is a command; the lines under
//     it, up to the next prompt, are its output, compared line by line after
//     the normalization of what truly varies (log times, durations, the
//     version make stamps, kubectl's AGE column).
//   - ```sh (or shell, bash): a script. Every line is a command (comment and
//     blank lines skipped; here-documents and continuation lines joined),
//     which must exit 0; its output is not compared.
//   - ```text, ```yaml and any other info string: not run (output, files).
//   - no info string: a transcript if a line starts with "$ ", a script if
//     its first line starts with a program (bin/... or one on PATH),
//     otherwise output, not run.
//
// A command that keeps running (make run, ipam-server, ipam-controller, or
// any line ending in "&") runs in the background until it prints that it is
// ready; running it again (with the same flags or others) stops the first
// as Ctrl-C does. Each section runs from a fresh copy, unless it goes on
// from the one above (continues in readme_test.go). The tests live in the
// _test.go files; this package has no code of its own.
package doctest
