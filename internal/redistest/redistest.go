// Package redistest runs real redis-server processes for tests: the one
// scripts/test.sh starts (MAINTAINER_TEST_REDIS_ADDR), or throw-away ones
// started here on free loopback ports.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvAddr names the redis-server the tests share (scripts/test.sh starts
// one and exports its 127.0.0.1:PORT).
const EnvAddr = "MAINTAINER_TEST_REDIS_ADDR"

// ErrNotInstalled: redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not installed")

// Server is a redis-server started by Start; only these are ever killed.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	once sync.Once
}

// Start starts a throw-away redis-server (no persistence, working dir dir)
// on a free loopback port and waits until it answers PING. A port taken
// between choosing and binding it is retried on another port.
func Start(dir string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &bytes.Buffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = p.cmd.Wait(); close(p.done) }()
		if lastErr = p.waitReady(); lastErr == nil {
			return p, nil
		}
		p.Stop()
	}
	return nil, lastErr
}

func (p *Server) waitReady() error {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("redis-server on %s exited: %s", p.Addr, p.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not answering: %v; output: %s", p.Addr, err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (like a crash: no goodbye to clients) and waits for
// it to exit.
func (p *Server) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// Main runs a test binary with a shared redis-server: EnvAddr's, else one
// started for the binary. It returns the address ("" with a reason when
// redis-server is not installed) through addr and skip.
func Main(m *testing.M, addr, skip *string) int {
	if a := os.Getenv(EnvAddr); a != "" {
		*addr = a
		return m.Run()
	}
	srv, err := Start(os.TempDir())
	switch {
	case errors.Is(err, ErrNotInstalled):
		*skip = fmt.Sprintf("redis-server is not installed and %s is not set", EnvAddr)
	case err != nil:
		fmt.Fprintln(os.Stderr, "start redis-server:", err)
		return 1
	default:
		defer srv.Stop()
		*addr = srv.Addr
	}
	return m.Run()
}

// Need returns the shared address, else starts a server for this test;
// it skips the test only when redis-server is not installed.
func Need(t testing.TB) string {
	t.Helper()
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	return StartT(t).Addr
}

// StartT starts a server killed at the end of the test.
func StartT(t testing.TB) *Server {
	t.Helper()
	p, err := Start(t.TempDir())
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// ClosedAddr is a loopback address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// Client is a plain go-redis client closed at the end of the test, for
// reaching behind the maintainer's back (deleting a lock key).
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
