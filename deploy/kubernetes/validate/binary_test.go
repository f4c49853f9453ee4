package validate

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The version and commit the test stamps into the binary, as the
// Dockerfile does with its VERSION and COMMIT build arguments.
const (
	testVersion = "v0.0.0-k8s-validate"
	testCommit  = "0123456789abcdef"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the root of the maintainer module, three levels up.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(gomod, []byte("module github.com/iceberg-maintainer/maintainer\n")) {
		t.Fatalf("the maintainer module is not at %s (go.mod: %v)", root, err)
	}
	return root
}

// dockerfile is what the tests read from the Dockerfile.
type dockerfile struct {
	goBuild    string   // the RUN line (continuations joined) that runs go build
	finalFrom  string   // image of the last stage
	user       string   // last USER
	entrypoint string   // last ENTRYPOINT
	expose     []string // EXPOSE ports
	labels     string   // every LABEL instruction, joined
}

func readDockerfile(t testing.TB) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(l)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur += s + " "
			continue
		}
		lines = append(lines, cur+trimmed)
		cur = ""
	}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			for _, x := range f {
				if !strings.HasPrefix(x, "--") {
					d.finalFrom = x
					break
				}
			}
		case "USER":
			d.user = strings.TrimSpace(rest)
		case "ENTRYPOINT":
			d.entrypoint = strings.TrimSpace(rest)
		case "EXPOSE":
			d.expose = append(d.expose, strings.Fields(rest)...)
		case "LABEL":
			d.labels += rest + " "
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.goBuild = rest
			}
		}
	}
	return d
}

// TestDockerfile checks the Dockerfile's contract, since the image itself
// cannot be built here: a static build, distroless nonroot, 65532, the
// entrypoint and the port.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	for _, want := range []string{
		"CGO_ENABLED=0",
		"go build -trimpath",
		`-ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}"`,
		"./cmd/maintainer",
		"--mount=type=cache,target=/go/pkg/mod",
		"--mount=type=cache,target=/root/.cache/go-build",
	} {
		if !strings.Contains(d.goBuild, want) {
			t.Errorf("the Dockerfile's go build %q lacks %q", d.goBuild, want)
		}
	}
	if d.finalFrom != "gcr.io/distroless/static-debian12:nonroot" && d.finalFrom != "scratch" {
		t.Errorf("final stage FROM %q, want gcr.io/distroless/static-debian12:nonroot (or scratch)", d.finalFrom)
	}
	if d.user != "65532:65532" {
		t.Errorf("USER %q, want 65532:65532", d.user)
	}
	if d.entrypoint != `["/maintainer"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/maintainer\"]", d.entrypoint)
	}
	if !containsPort(d.expose, "8080") {
		t.Errorf("EXPOSE %v, want 8080", d.expose)
	}
	for _, l := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source"} {
		if !strings.Contains(d.labels, l) {
			t.Errorf("no OCI label %s", l)
		}
	}
	// The binary is found at the entrypoint's path in the image.
	root := repoRoot(t)
	di, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd", "config"} {
		for _, l := range strings.Split(string(di), "\n") {
			if strings.TrimSpace(l) == keep {
				t.Errorf(".dockerignore excludes %s, which the build needs", keep)
			}
		}
	}
}

func containsPort(ports []string, p string) bool {
	for _, x := range ports {
		if x == p || strings.HasPrefix(x, p+"/") {
			return true
		}
	}
	return false
}

// maintainerBinary builds cmd/maintainer from the parent module the way
// the Dockerfile does (CGO_ENABLED=0, -trimpath, the same -ldflags), once.
func maintainerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the maintainer binary")
	}
	root := repoRoot(t)
	binOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			binErr = err
			return
		}
		binDir, binErr = os.MkdirTemp("", "maintainer-k8s-validate-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "maintainer")
		start := time.Now()
		cmd := exec.Command(goCmd, "build", "-trimpath",
			"-ldflags", fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", testVersion, testCommit),
			"-o", binPath, "./cmd/maintainer")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("%v: %v\n%s", cmd.Args, err, out)
			return
		}
		t.Logf("built %s in %s (CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w -X ...\")", binPath, time.Since(start).Round(time.Second))
	})
	if binErr != nil {
		t.Fatalf("building the maintainer: %v", binErr)
	}
	return binPath
}

// TestStaticBinary checks that the build the image uses is a static
// executable (distroless/static has no libc) and that it runs.
func TestStaticBinary(t *testing.T) {
	bin := maintainerBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("not an ELF system: %v", err)
		}
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			t.Errorf("the binary has a PT_INTERP program header (a dynamic loader): it is not static")
		case elf.PT_DYNAMIC:
			t.Errorf("the binary has a PT_DYNAMIC segment: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("reading the imported libraries: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("the binary has a symbol table: -ldflags -s was not applied")
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("maintainer version: %v\n%s", err, out)
	}
	want := fmt.Sprintf("maintainer %s (commit %s,", testVersion, testCommit)
	if !strings.Contains(string(out), want) {
		t.Errorf("maintainer version printed %q, want it to contain %q (the -X flags)", out, want)
	}
	t.Logf("maintainer version: %s", strings.TrimSpace(string(out)))

	out, err = exec.Command(bin, "version", "--output", "json").Output()
	if err != nil {
		t.Fatalf("maintainer version --output json: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("maintainer version --output json printed %q: %v", out, err)
	}
	if v["version"] != testVersion || v["commit"] != testCommit {
		t.Errorf("version JSON %v, want version %q commit %q", v, testVersion, testCommit)
	}
}

// layout writes what the container sees (its ConfigMap and Secret files,
// with placeholder secrets, and its emptyDirs) under dir, with the config's
// paths inside the mounts moved there too, and returns the config's path.
func layout(t *testing.T, cc *configCase, dir string) string {
	t.Helper()
	mounts := append([]string(nil), cc.mountPaths...)
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var pairs []string
	for _, m := range mounts {
		pairs = append(pairs, m+"/", filepath.Join(dir, m)+"/")
	}
	rewrite := strings.NewReplacer(pairs...)
	for _, d := range cc.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range cc.files {
		if p == cc.configPath {
			content = rewrite.Replace(content)
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, cc.configPath)
}

// runValidate runs `maintainer config validate` with the container's
// environment (and nothing of the caller's beyond PATH).
func runValidate(t *testing.T, bin, cfg string, env map[string]string, dir string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, "config", "validate", "--config", cfg)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return string(out), code
}

// TestConfigsValidate runs the real binary's `config validate` on every
// maintainer.yaml the manifests mount, laid out as the container sees it.
func TestConfigsValidate(t *testing.T) {
	bin := maintainerBinary(t)
	r := check(loadDeployTree(t))
	if len(r.configs) == 0 {
		t.Fatalf("no maintainer configs found; problems: %v", r.problems)
	}
	seen := map[string]bool{}
	for _, cc := range r.configs {
		// The same pod appears in several builds (base, its overlays).
		key := cc.source[strings.Index(cc.source, ": ")+2:] + "\x00" + cc.files[cc.configPath]
		if seen[key] {
			continue
		}
		seen[key] = true
		t.Run(cc.source, func(t *testing.T) {
			dir := t.TempDir()
			cfg := layout(t, cc, dir)
			out, code := runValidate(t, bin, cfg, cc.env, dir)
			if code != 0 {
				t.Fatalf("maintainer config validate --config %s exited %d:\n%s", cc.configPath, code, out)
			}
			if !strings.Contains(out, ": valid (") {
				t.Errorf("unexpected output: %s", out)
			}
			t.Logf("%s", strings.TrimSpace(strings.ReplaceAll(out, dir, "")))
		})
	}
}

// TestConfigMisspelledKeyRejected shows that the binary's validation is
// not a formality: a misspelled key in a copy of the Deployment's config
// fails with exit code 2 and names the key.
func TestConfigMisspelledKeyRejected(t *testing.T) {
	bin := maintainerBinary(t)
	r := check(loadDeployTree(t))
	var cc *configCase
	for _, c := range r.configs {
		if c.command == "serve" && strings.HasPrefix(c.source, "kubernetes/base: Deployment/") {
			cc = c
			break
		}
	}
	if cc == nil {
		t.Fatal("the base Deployment's config was not found")
	}
	bad := *cc
	bad.files = map[string]string{}
	for k, v := range cc.files {
		bad.files[k] = v
	}
	re := regexp.MustCompile(`(?m)^(\s*)shutdown_grace:`)
	if !re.MatchString(bad.files[cc.configPath]) {
		t.Fatal("the config has no scheduler.shutdown_grace to misspell")
	}
	bad.files[cc.configPath] = re.ReplaceAllString(bad.files[cc.configPath], "${1}shutdown_grase:")
	dir := t.TempDir()
	out, code := runValidate(t, bin, layout(t, &bad, dir), bad.env, dir)
	if code != 2 || !strings.Contains(out, "shutdown_grase") {
		t.Fatalf("config validate with shutdown_grase exited %d, want 2 naming the key:\n%s", code, out)
	}
	t.Logf("rejected as expected (exit %d): %s", code, strings.TrimSpace(strings.ReplaceAll(out, dir, "")))

	// And a secret file that is not mounted: the config's token_file must
	// point into a mounted Secret.
	missing := *cc
	missing.files = map[string]string{}
	for k, v := range cc.files {
		if !strings.HasSuffix(k, "/server-token") {
			missing.files[k] = v
		}
	}
	dir = t.TempDir()
	out, code = runValidate(t, bin, layout(t, &missing, dir), missing.env, dir)
	if code != 2 || !strings.Contains(out, "server.token_file") {
		t.Fatalf("config validate without the server-token file exited %d, want 2 naming server.token_file:\n%s", code, out)
	}
	t.Logf("rejected as expected (exit %d): %s", code, strings.TrimSpace(strings.ReplaceAll(out, dir, "")))
}
