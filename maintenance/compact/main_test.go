package compact

import (
	"fmt"
	"os"
	"testing"

	"github.com/iceberg-maintainer/maintainer/internal/pqzstd"
)

// TestMain runs the tests with the zstd codec the maintainer binary
// registers (same bytes as arrow-go's, checked by pqzstd's tests).
func TestMain(m *testing.M) {
	if err := pqzstd.Register(); err != nil {
		fmt.Fprintln(os.Stderr, "register the zstd codec:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
