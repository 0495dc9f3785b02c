// Package docs holds the project's documentation; its test keeps the pages honest about the
// code: every relative link resolves (file and heading), and every test, benchmark or Go file
// a page names exists, so a page cannot go on describing code that was renamed or removed.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the documents a user reads: README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, files...)
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// A test, benchmark, example or fuzz target named in backticks, possibly with a
	// wildcard (`TestRegression_*Batch*`) or a subtest (`TestPlan/list`).
	testNameRE = regexp.MustCompile("`((?:Test|Benchmark|Example|Fuzz)[A-Z0-9_][A-Za-z0-9_*]*)(?:/[^`]*)?`")
	// A Go file of the repository named in backticks: `provider/pipeline.go`, `provider/history*_test.go`.
	goFileRE = regexp.MustCompile("`((?:[a-z0-9_.-]+/)+[A-Za-z0-9_*.-]+\\.go)`")
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	heading = strings.ToLower(heading)
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '—' && r != '–' && r != '×' && r != '≥' && r != '≤':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(md, -1) {
		h := strings.NewReplacer("`", "", "*", "").Replace(m[1])
		h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
		s := slug(h)
		// GitHub numbers repeated headings: name, name-1, name-2...
		if !out[s] {
			out[s] = true
			continue
		}
		for i := 1; ; i++ {
			if n := s + "-" + string(rune('0'+i)); !out[n] {
				out[n] = true
				break
			}
		}
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md names a file that exists and,
// with #anchor, a heading of that file.
func TestLinks(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, m := range linkRE.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links to %s: %v", page, target, err)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			tb, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if !anchors(string(tb))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", page, target, file, anchor)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d links checked: the pages were not found whole", checked)
	}
	t.Logf("%d links checked", checked)
}

// repoTests collects the names of every test, benchmark, example and fuzz function of the
// repository, nested modules included.
func repoTests(t *testing.T) []string {
	t.Helper()
	fnRE := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	var names []string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_out" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range fnRE.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestNamedCodeExists: a test or Go file a page names exists, so the pages cannot describe
// code that was renamed or removed.
func TestNamedCodeExists(t *testing.T) {
	tests := repoTests(t)
	if len(tests) < 100 {
		t.Fatalf("found %d test functions in the repository: the walk is broken", len(tests))
	}
	names, files := 0, 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, m := range testNameRE.FindAllStringSubmatch(md, -1) {
			pat := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(m[1]), `\*`, `\w*`) + "$")
			found := false
			for _, n := range tests {
				if pat.MatchString(n) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s names %s: no such test function in the repository", page, m[1])
			}
			names++
		}
		for _, m := range goFileRE.FindAllStringSubmatch(md, -1) {
			if first, _, _ := strings.Cut(m[1], "/"); strings.Contains(first, ".") {
				continue // another module's file (k8s.io/cloud-provider/...)
			}
			found := false
			// A path is the repository's, or relative to a nested module (docs/aws.md:
			// `ec2sim/latency.go` in providers/aws).
			for _, root := range []string{"..", "../providers/aws", "../bench"} {
				if matches, err := filepath.Glob(filepath.Join(root, m[1])); err == nil && len(matches) > 0 {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s names %s: no such file", page, m[1])
			}
			files++
		}
	}
	t.Logf("%d test names and %d Go files named by the pages checked", names, files)
}
