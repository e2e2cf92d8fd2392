package doctest

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// step is one command of a README as printed, with the output a transcript
// shows for it.
type step struct {
	file    string   // README path relative to the repository root
	line    int      // line of the command in the README (1-based)
	section string   // the heading the command is under
	cmd     string   // the command exactly as printed, without the "$ " prompt
	want    []string // the output printed under it (transcripts only)
	checked bool     // whether want is compared with what cmd prints
}

// where names the README line of a step in failure messages.
func (s step) where() string { return s.file + ":" + strconv.Itoa(s.line) }

// fence is a fenced block of a README.
type fence struct {
	line    int      // line of the opening fence
	lang    string   // the info string: sh, console, yaml, ...
	section string   // the nearest heading above it
	lines   []string // the lines between the fences
}

// readFences returns the fenced blocks of the markdown file path.
func readFences(path string) ([]fence, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out     []fence
		cur     *fence
		section string
		n       int
		mdtogo  bool
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &fence{line: n, lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), section: section}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		case strings.HasPrefix(l, "<!--mdtogo:"):
			mdtogo = true // kpt's function docs: text, its "#" lines no headings
		case strings.HasPrefix(l, "<!--mdtogo-->"):
			mdtogo = false
		case strings.HasPrefix(l, "#") && !mdtogo:
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
		}
	}
	return out, sc.Err()
}

// A block is run according to its info string: sh, shell and bash blocks
// are scripts (every command runs, its output is not compared); console
// blocks are transcripts ("$ " commands, each followed by its output). A
// block without an info string is a transcript when a line starts with
// "$ ", a script when its first line starts with a command (see
// looksLikeCommand), and otherwise output that is not run; every other
// info string (text, yaml, json, ...) is not run.
const (
	kindNotRun = iota
	kindScript
	kindTranscript
)

// blockKind says how the block f is run; path is the PATH commands are
// looked up in.
func blockKind(f fence, path string) int {
	switch f.lang {
	case "sh", "shell", "bash":
		return kindScript
	case "console":
		return kindTranscript
	case "":
	default:
		return kindNotRun
	}
	for _, l := range f.lines {
		if strings.HasPrefix(l, "$ ") {
			return kindTranscript
		}
	}
	for _, l := range f.lines {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if looksLikeCommand(l, path) {
			return kindScript
		}
		return kindNotRun
	}
	return kindNotRun
}

var commandWord = regexp.MustCompile(`^(bin/[a-z][a-z0-9-]*|[a-z][a-z0-9-]*)(\s|$)`)

// looksLikeCommand reports whether the line starts with a program of the
// repository (bin/...) or one found on path.
func looksLikeCommand(line, path string) bool {
	m := commandWord.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	if strings.HasPrefix(m[1], "bin/") {
		return true
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		if st, err := os.Stat(dir + "/" + m[1]); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

var heredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_]+)['"]?`)

// steps returns the commands of the README file (relative to root) in
// order; path is the PATH they will run with.
func steps(root, file, path string) ([]step, error) {
	fences, err := readFences(root + "/" + file)
	if err != nil {
		return nil, err
	}
	var out []step
	for _, f := range fences {
		switch blockKind(f, path) {
		case kindScript:
			out = append(out, scriptSteps(file, f)...)
		case kindTranscript:
			out = append(out, transcriptSteps(file, f)...)
		}
	}
	return out, nil
}

// scriptSteps splits a script block into its commands: a line, with the
// lines a trailing backslash or a here-document joins to it; blank lines
// and comment lines are skipped.
func scriptSteps(file string, f fence) []step {
	var out []step
	for i := 0; i < len(f.lines); i++ {
		l := f.lines[i]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		s := step{file: file, line: f.line + 1 + i, section: f.section, cmd: l}
		for strings.HasSuffix(s.cmd, `\`) && i+1 < len(f.lines) {
			i++
			s.cmd += "\n" + f.lines[i]
		}
		if m := heredoc.FindStringSubmatch(l); m != nil {
			for i+1 < len(f.lines) {
				i++
				s.cmd += "\n" + f.lines[i]
				if f.lines[i] == m[1] {
					break
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// transcriptSteps splits a transcript block into its "$ " commands and the
// output lines under each (blank lines at the end of an output dropped).
func transcriptSteps(file string, f fence) []step {
	var out []step
	for i := 0; i < len(f.lines); i++ {
		l := f.lines[i]
		if strings.HasPrefix(l, "$ ") {
			s := step{file: file, line: f.line + 1 + i, section: f.section,
				cmd: strings.TrimPrefix(l, "$ "), want: []string{}, checked: true}
			for strings.HasSuffix(s.cmd, `\`) && i+1 < len(f.lines) {
				i++
				s.cmd += "\n" + f.lines[i]
			}
			out = append(out, s)
			continue
		}
		if len(out) == 0 {
			continue // output before the first prompt: nothing produced it
		}
		s := &out[len(out)-1]
		s.want = append(s.want, l)
	}
	for i := range out {
		out[i].want = trimBlank(out[i].want)
	}
	return out
}

// trimBlank drops the blank lines at the end of lines.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
