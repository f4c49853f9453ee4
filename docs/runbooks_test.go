package docs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The convention runbooks.md follows, and this file checks: each runbook
// section starts with an explicit anchor line <a id="alertname"></a> (the
// alert name lower-cased) followed by the heading "## AlertName". Every
// alert of deploy/prometheus/rules.yaml has such a section, its
// runbook_url is runbookBase + "#" + the anchor, and every section is an
// alert of the rules.

const runbookBase = "https://github.com/iceberg-maintainer/maintainer/blob/main/docs/runbooks.md"

var (
	anchorLine = regexp.MustCompile(`^<a id="([^"]+)"></a>\s*$`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.+?)\s*$`)
)

// runbookSections returns anchor -> alert name of runbooks.md.
func runbookSections(t *testing.T) map[string]string {
	t.Helper()
	f := docFile(t, "runbooks.md")
	_, inside := f.fences()
	out := map[string]string{}
	for i, l := range f.lines {
		if inside[i] {
			continue
		}
		m := anchorLine.FindStringSubmatch(l)
		if m == nil {
			if strings.Contains(l, "<a id=") {
				t.Errorf("runbooks.md:%d: an anchor must be alone on its line: <a id=\"name\"></a>", i+1)
			}
			continue
		}
		id := m[1]
		j := i + 1
		for j < len(f.lines) && strings.TrimSpace(f.lines[j]) == "" {
			j++
		}
		h := heading.FindStringSubmatch(f.lines[min(j, len(f.lines)-1)])
		if h == nil || h[1] != "##" {
			t.Errorf("runbooks.md:%d: anchor %q is not followed by a ## heading", i+1, id)
			continue
		}
		if strings.ToLower(h[2]) != id {
			t.Errorf("runbooks.md:%d: anchor %q heads the section %q; the anchor must be its lower-cased name", i+1, id, h[2])
		}
		if _, dup := out[id]; dup {
			t.Errorf("runbooks.md:%d: anchor %q used twice", i+1, id)
		}
		out[id] = h[2]
	}
	if len(out) == 0 {
		t.Fatal("runbooks.md has no <a id> sections")
	}
	return out
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules reads deploy/prometheus/rules.yaml; ok is false when it does
// not exist.
func alertRules(t *testing.T) (rules []alertRule, ok bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "rules.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("deploy/prometheus/rules.yaml: %v", err)
	}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	return rules, true
}

// The runbook sections are well-formed.
func TestRunbookAnchors(t *testing.T) {
	runbookSections(t)
}

// Every alert of deploy/prometheus/rules.yaml has its runbook section and
// points at it; every runbook section is an alert.
func TestRunbooksMatchAlertRules(t *testing.T) {
	sections := runbookSections(t)
	rules, ok := alertRules(t)
	if !ok {
		// The rules ship with the docs: a move must not turn this into a pass.
		t.Fatal("deploy/prometheus/rules.yaml does not exist")
	}
	alerts := map[string]bool{}
	for _, r := range rules {
		id := strings.ToLower(r.Alert)
		alerts[id] = true
		if name, ok := sections[id]; !ok {
			t.Errorf("alert %s has no runbook section (want <a id=%q></a> and ## %s in runbooks.md)", r.Alert, id, r.Alert)
		} else if name != r.Alert {
			t.Errorf("alert %s: the runbook section is headed %q", r.Alert, name)
		}
		if want := runbookBase + "#" + id; r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	for id, name := range sections {
		if !alerts[id] {
			t.Errorf("runbooks.md has a section for %s, which deploy/prometheus/rules.yaml does not define", name)
		}
	}
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors of a Markdown file: explicit ids and GitHub's
// heading slugs.
func anchors(f mdFile) map[string]bool {
	_, inside := f.fences()
	out := map[string]bool{}
	for i, l := range f.lines {
		if inside[i] {
			continue
		}
		if m := anchorLine.FindStringSubmatch(l); m != nil {
			out[m[1]] = true
		}
		if h := heading.FindStringSubmatch(l); h != nil {
			s := strings.ToLower(strings.ReplaceAll(h[2], "`", ""))
			s = slugDrop.ReplaceAllString(s, "")
			out[strings.ReplaceAll(s, " ", "-")] = true
		}
	}
	return out
}

// Relative links between docs resolve (files and anchors), README.md links
// every page, and every deploy/ path the docs name exists.
func TestDocLinks(t *testing.T) {
	files := docFiles(t)
	byPath := map[string]mdFile{}
	for _, f := range files {
		byPath[f.path] = f
	}
	linked := map[string]bool{}
	for _, f := range files {
		_, inside := f.fences()
		for i, l := range f.lines {
			if inside[i] {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				at := fmt.Sprintf("%s:%d", f.path, i+1)
				resolved := f.path
				if file != "" {
					resolved = path.Clean(path.Join(path.Dir(f.path), file))
				}
				if strings.HasPrefix(resolved, "../") {
					if _, err := os.Stat(filepath.FromSlash(resolved)); err != nil {
						t.Errorf("%s: link to %s: %v", at, target, err)
					}
					continue
				}
				linked[resolved] = true
				tf, ok := byPath[resolved]
				if !ok {
					t.Errorf("%s: link to %s: docs/%s does not exist", at, target, resolved)
					continue
				}
				if frag != "" && !anchors(tf)[frag] {
					t.Errorf("%s: link to %s: docs/%s has no anchor #%s", at, target, resolved, frag)
				}
			}
		}
	}
	for _, f := range files {
		if f.path != "README.md" && !linked[f.path] {
			t.Errorf("docs/%s is not linked from any page", f.path)
		}
	}
	readme := byPath["README.md"]
	var fromReadme []string
	for _, l := range readme.lines {
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			fromReadme = append(fromReadme, path.Clean(strings.SplitN(m[1], "#", 2)[0]))
		}
	}
	for _, f := range files {
		if f.path != "README.md" && !slices.Contains(fromReadme, f.path) {
			t.Errorf("docs/README.md does not link %s", f.path)
		}
	}
}

var deployPath = regexp.MustCompile(`^deploy/[\w./-]+$`)

// Every deploy/... path named in a code span exists.
func TestDeployPathsExist(t *testing.T) {
	var missing []string
	named := 0
	for _, f := range docFiles(t) {
		spans, lines := f.proseSpans()
		for i, s := range spans {
			if !deployPath.MatchString(s) {
				continue
			}
			named++
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(s))); err != nil {
				missing = append(missing, fmt.Sprintf("%s:%d: %s", f.path, lines[i], s))
			}
		}
	}
	if named < 5 {
		t.Fatalf("the docs name %d deploy/ paths; the span extraction is broken", named)
	}
	for _, m := range missing {
		t.Errorf("%s does not exist", m)
	}
}
