package redislock

import (
	"log/slog"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/iceberg-maintainer/maintainer/internal/redistest"
)

// sharedAddr is the redis-server the single-node tests share (tests use
// random key prefixes); skipReason says why there is none.
var sharedAddr, skipReason string

func TestMain(m *testing.M) {
	// Dead nodes are the point of several tests; go-redis would print
	// every failed dial.
	redis.SetLogger(RedisLogger{Log: slog.New(slog.DiscardHandler)})
	os.Exit(redistest.Main(m, &sharedAddr, &skipReason))
}

// needRedis returns the shared redis-server's address, skipping the test
// only when redis-server is not installed.
func needRedis(t *testing.T) string {
	t.Helper()
	if sharedAddr == "" {
		t.Skip(skipReason)
	}
	return sharedAddr
}

// startNodes starts n independent redis-servers for a quorum test, killed
// at the end of the test.
func startNodes(t *testing.T, n int) []*redistest.Server {
	t.Helper()
	nodes := make([]*redistest.Server, n)
	for i := range nodes {
		nodes[i] = redistest.StartT(t)
	}
	return nodes
}

func addrsOf(nodes []*redistest.Server) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr
	}
	return out
}

// rawClient is a plain go-redis client, for reaching behind the Locker's
// back (deleting a lock, planting a value on one node).
func rawClient(t *testing.T, addr string) *redis.Client { return redistest.Client(t, addr) }

func closedAddr(t *testing.T) string { return redistest.ClosedAddr(t) }
