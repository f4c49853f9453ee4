// Package redistest runs real redis-server processes for tests: the one
// scripts/test.sh starts (MAINTAINER_TEST_REDIS_ADDR), or throw-away ones
// started here on free loopback ports.
package redistest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	tls  *tls.Config
}

// Start starts a throw-away redis-server (no persistence, working dir dir)
// on a free loopback port and waits until it answers PING. A port taken
// between choosing and binding it is retried on another port.
func Start(dir string) (*Server, error) {
	return start(dir, nil, func(port string) []string { return []string{"--port", port} })
}

// start runs redis-server with the listening arguments listen(port) gives;
// tlsCfg is what a client needs to reach it.
func start(dir string, tlsCfg *tls.Config, listen func(port string) []string) (*Server, error) {
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
		p := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &bytes.Buffer{}, done: make(chan struct{}), tls: tlsCfg}
		args := append(listen(strconv.Itoa(port)), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
		p.cmd = exec.Command(bin, args...)
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
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialerRetries: 1, TLSConfig: p.tls})
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

// StartTLS starts a redis-server that only speaks TLS, with a certificate
// for 127.0.0.1 signed by a throw-away CA, killed at the end of the test.
// It returns the server and the CA's PEM.
func StartTLS(t testing.TB) (*Server, []byte) {
	t.Helper()
	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, b := range map[string][]byte{cert: certPEM, key: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p, err := start(dir, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, func(port string) []string {
		return []string{"--port", "0", "--tls-port", port, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no"}
	})
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, caPEM
}

// SelfSigned makes a CA and a server certificate for 127.0.0.1 signed by it.
func SelfSigned() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
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
