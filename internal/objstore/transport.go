package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// ErrUnreachable marks a request whose connection to the object store could
// not be made (refused, no such host, connect timeout): nothing reached the
// store.
var ErrUnreachable = errors.New("object store unreachable")

// Transport is what every S3 client of the process shares: an HTTP client
// whose requests fail when they make no progress for Config.RequestTimeout,
// a retryer bounded by Config.MaxAttempts that logs each retry, and a
// middleware that lets the retry log name the request.
type Transport struct {
	cfg  Config
	log  *slog.Logger
	http aws.HTTPClient
}

// NewTransport builds the transport; log receives a warning for every
// retried request (nil: slog.Default()).
func NewTransport(cfg Config, log *slog.Logger) *Transport {
	if log == nil {
		log = slog.Default()
	}
	return &Transport{cfg: cfg, log: log, http: newHTTPClient(cfg.RequestTimeout, nil)}
}

// newHTTPClient returns the SDK's HTTP client (its redirect handling)
// without a whole-request timeout: progress, not duration, is bounded.
func newHTTPClient(timeout time.Duration, proxy *url.URL) aws.HTTPClient {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return &progressConn{Conn: c, timeout: timeout}, nil
	}
	client := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		// Like iceberg-go's S3 IO: many parallel requests to one endpoint.
		t.MaxIdleConns, t.MaxIdleConnsPerHost, t.MaxConnsPerHost = 256, 256, 2048
		t.DialContext = dial
		t.TLSHandshakeTimeout = timeout
		t.ResponseHeaderTimeout = timeout
		if proxy != nil {
			t.Proxy = http.ProxyURL(proxy)
		}
	})
	return namedBodies{client}
}

// apply puts the transport into an AWS config; a proxy gets a client of its
// own.
func (t *Transport) apply(c *aws.Config, proxy *url.URL) {
	c.HTTPClient = t.http
	if proxy != nil {
		c.HTTPClient = newHTTPClient(t.cfg.RequestTimeout, proxy)
	}
	c.Retryer = func() aws.Retryer {
		return &loggingRetryer{RetryerV2: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = t.cfg.MaxAttempts
			o.MaxBackoff = MaxBackoff
		}), log: t.log}
	}
	c.RetryMaxAttempts = 0 // the retryer says
	c.APIOptions = append(c.APIOptions, nameRequests)
}

// progressConn fails a Read or Write that waits longer than timeout. Each
// call pushes the deadline of both directions forward: a long upload keeps
// the pending response read alive, and a long download the connection.
type progressConn struct {
	net.Conn
	timeout time.Duration
}

func (c *progressConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *progressConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// namedBodies makes a failed read of a response body name the request: a
// body is read after the SDK returned, so no SDK error names it. It also
// records each request as in flight (package waiting) in the recorder of
// its context, the task's, from sending it until its body is read to the
// end, fails or is closed: a stalled download is still waited on.
type namedBodies struct{ c aws.HTTPClient }

func (n namedBodies) Do(r *http.Request) (*http.Response, error) {
	what := r.Method + " " + redacted(r)
	end := waiting.Begin(r.Context(), "object store: "+what)
	resp, err := n.c.Do(r)
	if err != nil || resp.Body == nil {
		end()
		return resp, err
	}
	resp.Body = &namedBody{ReadCloser: resp.Body, what: what, end: sync.OnceFunc(end)}
	return resp, nil
}

type namedBody struct {
	io.ReadCloser
	what string
	end  func() // the request is no longer waited on
}

func (b *namedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
		if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("read the response of %s: %w", b.what, err)
		}
	}
	return n, err
}

func (b *namedBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

// redacted is the request's URL without the X-Amz-* parameters of its
// query (a presigned URL carries credentials there); the rest (a listing's
// prefix) says what was asked.
func redacted(r *http.Request) string {
	u := *r.URL
	u.User = nil
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// requestError carries the request an attempt failed on to the retry log.
//
// gocloud's s3blob, under iceberg-go's S3 IO, takes any failed S3 call whose
// text contains "301" for a missing bucket (a 301 redirect), and iceberg-go
// then reports "file does not exist" without the cause: a refused port
// 46301, a reset while reading 00301-….metadata.json, a 503 whose request ID
// holds 301. So the text is the error's own, no URL added, and a "301" in it
// is written "3·01" unless the store did answer 301, or the error is one
// gocloud passes on unread (a deadline, a cancellation, EOF).
type requestError struct {
	err     error
	request string
}

func (e *requestError) Error() string {
	msg := e.err.Error()
	var re *awshttp.ResponseError
	if errors.As(e.err, &re) && re.HTTPStatusCode() == http.StatusMovedPermanently ||
		errors.Is(e, context.DeadlineExceeded) || errors.Is(e.err, context.Canceled) || errors.Is(e.err, io.EOF) {
		return msg
	}
	return strings.ReplaceAll(msg, "301", "3·01")
}

// Is makes an attempt that failed on the transport's progress deadline
// (progressConn: os.ErrDeadlineExceeded) a context.DeadlineExceeded too, as
// net/http's own timeouts (awaiting response headers) already are: a stall
// is one kind of error whichever timer caught it, and gocloud passes a
// deadline on with its text.
func (e *requestError) Is(target error) bool {
	return target == context.DeadlineExceeded && errors.Is(e.err, os.ErrDeadlineExceeded)
}

func (e *requestError) Unwrap() error { return e.err }

// nameRequests wraps the error of every attempt in a requestError. It runs
// in the deserialize step, inside the retry loop, where the request is the
// one sent.
func nameRequests(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("maintainer/name-requests",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if req, ok := in.Request.(*smithyhttp.Request); ok && err != nil {
				err = &requestError{err: err, request: req.Method + " " + redacted(req.Request)}
			}
			return out, md, err
		}), middleware.Before)
}

// loggingRetryer logs every retry it grants: a run waiting on a slow or
// stalled store says what it waits on.
type loggingRetryer struct {
	aws.RetryerV2
	log *slog.Logger
}

func (r *loggingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := r.RetryerV2.RetryDelay(attempt, err)
	if derr == nil {
		request := "?"
		var re *requestError
		if errors.As(err, &re) {
			request = re.request
		}
		r.log.Warn("object store request failed; retrying", "request", request,
			"attempt", attempt, "max_attempts", r.MaxAttempts(), "retry_in", d, "err", err)
	}
	return d, derr
}
