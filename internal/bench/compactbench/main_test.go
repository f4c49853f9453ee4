package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundsRefusedBeforeAnythingIsMade(t *testing.T) {
	for _, args := range [][]string{
		{"-rounds", "0"},                       // generate-only without -dir: its table would be removed at exit
		{"-rounds", "-1", "-dir", t.TempDir()}, // no such count
	} {
		err := run(args)
		if err == nil || !strings.Contains(err.Error(), "-rounds") {
			t.Errorf("run %q: error %v, want one naming -rounds", args, err)
		}
	}
}

// -rounds 0 -dir D generates the table and its pristine copy, and builds,
// installs and runs no tool.
func TestRoundsZeroOnlyGenerates(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"-rounds", "0", "-dir", dir, "-appends", "3", "-rows", "10", "-partitions", "1"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"custom/table", "custom/table.orig"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the generated table: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bin")); !os.IsNotExist(err) {
		t.Errorf("a tool was built for generating alone (%s: %v)", filepath.Join(dir, "bin"), err)
	}
}
