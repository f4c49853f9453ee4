// Package docs holds the operator documentation (Markdown) and the tests
// that keep it true to the code. Run them with `go test ./docs/` (or
// `make docs`); the first run builds cmd/maintainer, which takes a minute.
//
// What is checked, and the conventions the pages follow for it:
//
//   - configuration.md (config_test.go): every key of config.Config, walked
//     by reflection over its yaml tags, is one row of a | key | type |
//     default | meaning | table, with its full path in a code span
//     (`scheduler.poll_interval`; task keys from the task down:
//     `compact.trigger.interval`); no row names a key the code lacks; the
//     type word matches the Go type; a default written as a code span is
//     what the code uses when the key is left out (checked by loading a
//     config that sets it, through config.Parse and Config.ForTable), and a
//     default written as prose ("none", "off", "table's ... else ...") is
//     the zero value. Key-like code spans anywhere in docs/ must be keys.
//   - metrics.md (metrics_test.go): the | metric | type | labels | tables
//     list exactly the iceberg_maintainer_* families that maintenance.NewMetrics
//     and server.New register, with their types and label names; every
//     iceberg_maintainer_* name in docs/ exists.
//   - runbooks.md (runbooks_test.go): each section starts with
//     <a id="alertname"></a> and "## AlertName"; every alert of
//     deploy/prometheus/rules.yaml has one, and its runbook_url points at it.
//   - every ```yaml block whose first line starts with "# maintainer.yaml"
//     is a valid config (config.Parse, with placeholder files for its
//     *_file secrets and the environment in docEnv);
//   - every `maintainer ...` command in ```sh blocks uses commands and flags
//     that the built binary's --help lists (commands_test.go); every curl
//     body and JSON request example is accepted by the server; every JSON
//     output example decodes into the code's type and has no field the code
//     does not write;
//   - relative links resolve, docs/README.md links every page, and every
//     deploy/... path in a code span exists.
package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// maintainerBinary builds cmd/maintainer once per test run.
func maintainerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "docs-maintainer-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "maintainer")
		var out bytes.Buffer
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/iceberg-maintainer/maintainer/cmd/maintainer")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/maintainer: %v\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
