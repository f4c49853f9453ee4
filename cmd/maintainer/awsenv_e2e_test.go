package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A broken AWS environment (AWS_PROFILE naming a profile no config file
// has) concerns S3 setups only: on a local warehouse whose catalog names no
// S3 location, every command works as without it; a catalog on S3 still
// fails at setup with exit 2, naming the profile, and a bad S3 property
// there is exit 2 naming the property. The variables are the process's
// (t.Setenv), so this test does not run in parallel.
func TestAWSEnvironmentConcernsOnlyS3(t *testing.T) {
	const profile = "maintainer-test-no-such-profile"
	// Made before the environment breaks: making them loads it too.
	local := newGenWarehouse(t, "events")
	w := newS3Warehouse(t)
	cfg := w.config(t, w.srv.URL, "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := writeFile(t, filepath.Join(w.dir, "bad.yaml"), strings.Replace(string(text),
		"  properties:\n", "  properties:\n    s3.path-style-access: \"maybe\"\n", 1))

	empty := writeFile(t, filepath.Join(t.TempDir(), "aws-config"), "")
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_PROFILE", profile)

	for _, args := range [][]string{{"status"}, {"plan"}, {"run", "--force"}} {
		r := runMaintainer(t, local.dir, append(args, "--config", local.cfg, "--output", "json")...)
		expectCode(t, r, 0, strings.Join(args, " ")+" on a local warehouse with AWS_PROFILE="+profile)
	}

	r := runMaintainer(t, w.dir, "plan", "--config", cfg)
	expectCode(t, r, 2, "plan on S3 with AWS_PROFILE="+profile)
	if !strings.Contains(r.stderr, profile) {
		t.Errorf("the error does not name the profile:\n%s", r.stderr)
	}

	r = runMaintainer(t, w.dir, "plan", "--config", bad)
	expectCode(t, r, 2, "plan with s3.path-style-access: maybe")
	if !strings.Contains(r.stderr, "s3.path-style-access") {
		t.Errorf("the error does not name the property:\n%s", r.stderr)
	}
}
