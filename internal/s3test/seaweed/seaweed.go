// Package seaweed gives tests a real S3 server: SeaweedFS (`weed server`:
// master, volume server, filer and S3 gateway in one process) with an access
// key and a secret, buckets created only on request
// (-s3.autoCreateBucket=false). Shared is the server scripts/test.sh starts
// for the whole run; Start runs a private one that a test may pause (SIGSTOP)
// or kill. Where a failure must come on cue (a chosen request failing, a
// clock to advance), use the in-process server of internal/s3test instead.
//
// scripts/test.sh builds the weed binary (cached in .cache/weed) and
// exports:
//
//	MAINTAINER_TEST_S3_ENDPOINT    http://127.0.0.1:PORT of the shared S3 gateway
//	MAINTAINER_TEST_S3_ACCESS_KEY  its access key
//	MAINTAINER_TEST_S3_SECRET_KEY  its secret key
//	MAINTAINER_TEST_S3_MASTER      its master, 127.0.0.1:PORT.GRPC_PORT (for PutModified)
//	MAINTAINER_TEST_WEED           the weed binary (for Start and PutModified)
//
// Only tests import this package.
package seaweed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The environment scripts/test.sh sets (see the package comment).
const (
	EnvEndpoint  = "MAINTAINER_TEST_S3_ENDPOINT"
	EnvAccessKey = "MAINTAINER_TEST_S3_ACCESS_KEY"
	EnvSecretKey = "MAINTAINER_TEST_S3_SECRET_KEY"
	EnvMaster    = "MAINTAINER_TEST_S3_MASTER"
	EnvWeed      = "MAINTAINER_TEST_WEED"
)

// Region is the region the clients sign for; SeaweedFS accepts any.
const Region = "us-east-1"

// startTimeout bounds how long Start waits for a new server to take writes.
const startTimeout = 60 * time.Second

// Server is a SeaweedFS S3 gateway: the shared one, or one of this test's.
type Server struct {
	Endpoint, AccessKey, SecretKey string

	weed   string // the weed binary ("" when unknown)
	master string // the master as weed shell takes it, host:port.grpcPort ("" when unknown)

	// Set for a server Start ran: its process (the leader of its own
	// process group), closed done when it has exited, and its log.
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
	stop    sync.Once

	clientOnce sync.Once
	client     *s3.Client
}

// Shared returns the suite's server from the MAINTAINER_TEST_S3_*
// variables; it skips the test when they are unset, and fails it instead
// when MAINTAINER_REQUIRE_TOOLS=1 or CI=true.
func Shared(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Endpoint:  os.Getenv(EnvEndpoint),
		AccessKey: os.Getenv(EnvAccessKey),
		SecretKey: os.Getenv(EnvSecretKey),
		master:    os.Getenv(EnvMaster),
		weed:      os.Getenv(EnvWeed),
	}
	if s.Endpoint == "" || s.AccessKey == "" || s.SecretKey == "" {
		skipOrFail(t, EnvEndpoint+", "+EnvAccessKey+" and "+EnvSecretKey+" are not all set (scripts/test.sh starts SeaweedFS and sets them)")
	}
	return s
}

// Start runs a private weed server for this test from MAINTAINER_TEST_WEED
// (skipped when unset, failed instead under MAINTAINER_REQUIRE_TOOLS=1 or
// CI=true), on free loopback ports in a temporary folder, and waits until
// its S3 gateway stores objects. It is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	weed := os.Getenv(EnvWeed)
	if weed == "" {
		skipOrFail(t, EnvWeed+" is not set (scripts/test.sh builds SeaweedFS and sets it)")
	}
	dir := t.TempDir()
	var lastErr error
	// A port another process takes between choosing and binding it makes
	// weed exit: try again on other ports.
	for range 3 {
		began := time.Now()
		s, err := start(weed, dir)
		if err == nil {
			t.Cleanup(s.kill)
			t.Logf("seaweed: weed server with S3 at %s ready in %s", s.Endpoint, time.Since(began).Round(time.Millisecond))
			return s
		}
		lastErr = err
	}
	t.Fatalf("seaweed: %v", lastErr)
	return nil
}

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("MAINTAINER_REQUIRE_TOOLS") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("seaweed: %s, and this run requires it (MAINTAINER_REQUIRE_TOOLS=1 or CI=true)", msg)
	}
	t.Skip("seaweed: " + msg)
}

// start runs one weed server in a fresh folder under dir.
func start(weed, dir string) (*Server, error) {
	// Every HTTP listener and its gRPC twin gets a port (weed would
	// otherwise take HTTP port + 10000, which may be in use).
	portNames := []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
		"filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc"}
	work, err := os.MkdirTemp(dir, "weed-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(len(portNames))
	if err != nil {
		return nil, err
	}
	s := &Server{AccessKey: "test-" + strings.ToLower(rand.Text()[:12]), SecretKey: rand.Text(), weed: weed,
		logPath: filepath.Join(work, "weed.log"), done: make(chan struct{})}
	config := filepath.Join(work, "s3.json")
	if err := writeIdentities(config, s.AccessKey, s.SecretKey); err != nil {
		return nil, err
	}
	args := append([]string{"server"}, serverArgs(filepath.Join(work, "data"), config)...)
	for i, name := range portNames {
		args = append(args, "-"+name+"="+strconv.Itoa(ports[i]))
	}
	if err := os.Mkdir(filepath.Join(work, "data"), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// SeaweedFS's address syntax for an explicit gRPC port: host:port.grpc.
	s.master = fmt.Sprintf("127.0.0.1:%d.%d", ports[0], ports[1])
	s.Endpoint = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[6]))
	s.cmd = exec.Command(weed, args...)
	s.cmd.Dir = work
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.Env = append(os.Environ(), noAllocationHold)
	// Its own process group, so Pause, Resume and Stop reach every process.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", weed, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.waitReady(startTimeout); err != nil {
		s.kill()
		return nil, fmt.Errorf("weed server in %s: %w\n%s", work, err, s.logTail())
	}
	return s, nil
}

// serverArgs are the arguments of `weed server` after "server", without ports:
// every component on loopback, data in dataDir, the identities of
// s3Config, buckets only on request, small volumes, and nothing else that
// listens or phones home. scripts/test.sh passes the same.
func serverArgs(dataDir, s3Config string) []string {
	return []string{
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + dataDir,
		"-filer", "-s3", "-s3.config=" + s3Config, "-s3.autoCreateBucket=false",
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.volumeSizeLimitMB=64", "-volume.max=0", "-master.telemetry=false",
		// One master that elects itself at once (no peers to wait for).
		"-master.peers=none",
	}
}

// noAllocationHold is added to the environment of `weed server` (SeaweedFS
// reads master.toml keys from WEED_* variables): no hold on volume
// allocation after a fresh start, which otherwise delays the first write by
// seconds waiting for volume servers that a one-process cluster does not
// have.
const noAllocationHold = "WEED_MASTER_VOLUME_GROWTH_ALLOCATION_DEFERRAL=0s"

// identities is SeaweedFS's S3 identities file (-s3.config).
type identities struct {
	Identities []identity `json:"identities"`
}

type identity struct {
	Name        string       `json:"name"`
	Credentials []credential `json:"credentials"`
	Actions     []string     `json:"actions"`
}

type credential struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// writeIdentities writes an -s3.config file with one identity of every
// right (the maintainer lists, reads, writes and deletes).
func writeIdentities(path, accessKey, secretKey string) error {
	b, err := json.Marshal(identities{Identities: []identity{{
		Name:        "maintainer-test",
		Credentials: []credential{{AccessKey: accessKey, SecretKey: secretKey}},
		Actions:     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// waitReady waits until the gateway stores and deletes an object: until
// then the filer or the volume server may not have joined the master.
func (s *Server) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	const probe = "ready-probe"
	var err error
	for {
		select {
		case <-s.done:
			return errors.New("exited while starting")
		default:
		}
		if err = s.probe(ctx, probe); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("S3 gateway at %s not storing objects after %s: %w", s.Endpoint, timeout, err)
		case <-s.done:
			return errors.New("exited while starting")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probe creates bucket (if missing), stores an object in it and deletes it.
// Its requests are not retried: waitReady does that, and the SDK's retries
// would use up the client's retry quota while the gateway is not listening.
func (s *Server) probe(ctx context.Context, bucket string) error {
	c := s.s3()
	once := func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.HeadBucket(rctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}, once); err != nil {
		if _, err := c.CreateBucket(rctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}, once); err != nil {
			return fmt.Errorf("create bucket %s: %w", bucket, err)
		}
	}
	if _, err := c.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("probe"), Body: strings.NewReader("probe")}, once); err != nil {
		return fmt.Errorf("put s3://%s/probe: %w", bucket, err)
	}
	if _, err := c.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("probe")}, once); err != nil {
		return fmt.Errorf("delete s3://%s/probe: %w", bucket, err)
	}
	return nil
}

// s3 is the server's client (path-style, static credentials, the SDK's
// retries).
func (s *Server) s3() *s3.Client {
	s.clientOnce.Do(func() {
		s.client = s3.New(s3.Options{
			Region:       Region,
			BaseEndpoint: aws.String(s.Endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		})
	})
	return s.client
}

// Client is an S3 client of the server, for a test's own requests.
func (s *Server) Client() *s3.Client { return s.s3() }

// Bucket creates a fresh, uniquely named bucket and returns its name. It
// stays until the server stops.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := bucketName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.s3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("seaweed: create bucket %s on %s: %v", name, s.Endpoint, err)
	}
	return name
}

// bucketName is a valid S3 bucket name (3-63 lower-case letters, digits and
// hyphens) made of the test's name and a random suffix.
func bucketName(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "t"
	}
	return base + "-" + strings.ToLower(rand.Text()[:10])
}

// Props are the iceberg-go (and maintainer) catalog properties that reach
// the server.
func (s *Server) Props() map[string]string {
	return map[string]string{
		"s3.endpoint":          s.Endpoint,
		"s3.region":            Region,
		"s3.access-key-id":     s.AccessKey,
		"s3.secret-access-key": s.SecretKey,
		"s3.path-style-access": "true",
	}
}

// Keys returns the key of every object in bucket.
func (s *Server) Keys(t testing.TB, bucket string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	p := s3.NewListObjectsV2Paginator(s.s3(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		page, err := p.NextPage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("seaweed: list s3://%s on %s: %v", bucket, s.Endpoint, err)
		}
		for _, o := range page.Contents {
			keys[aws.ToString(o.Key)] = true
		}
	}
	return keys
}

// Pause stops (SIGSTOP) every process of a server Start ran: requests to it
// hang until Resume. It fails the test on the shared server.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP, "pause")
	// SIGSTOP takes effect as each thread is next scheduled: wait until all
	// are stopped, so that no request the test sends next is still served.
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(s.cmd.Process.Pid)
		if err != nil {
			t.Fatalf("seaweed: pause the server at %s: %v", s.Endpoint, err)
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("seaweed: pause the server at %s: %d threads of process %d still running 10s after SIGSTOP", s.Endpoint, running, s.cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runningThreads counts the threads of process pid that are not stopped,
// from /proc/PID/task/TID/stat (state T: stopped by a signal).
func runningThreads(pid int) (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return 0, fmt.Errorf("list the threads of process %d: %v", pid, err)
	}
	running := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			running++
		}
	}
	return running, nil
}

// Resume continues (SIGCONT) a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT, "resume")
}

// Stop kills a server Start ran (like a crash) and waits for it to exit;
// requests to it are refused from then on. It fails the test on the shared
// server.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		t.Fatalf("seaweed: cannot stop the shared server at %s (use Start for a server of the test's own)", s.Endpoint)
	}
	s.kill()
}

func (s *Server) signal(t testing.TB, sig syscall.Signal, what string) {
	t.Helper()
	if s.cmd == nil {
		t.Fatalf("seaweed: cannot %s the shared server at %s (use Start for a server of the test's own)", what, s.Endpoint)
	}
	select {
	case <-s.done:
		t.Fatalf("seaweed: cannot %s the server at %s: it has exited", what, s.Endpoint)
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("seaweed: %s the server at %s (process group %d): %v", what, s.Endpoint, s.cmd.Process.Pid, err)
	}
}

// kill ends a server Start ran, once: SIGKILL to its process group (a
// stopped process dies of it too), then waits for it.
func (s *Server) kill() {
	s.stop.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
}

// logTail is the end of a started server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// freePorts returns n distinct free loopback ports (all held open at once
// while choosing, so none is chosen twice).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
