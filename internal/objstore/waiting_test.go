package objstore

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/iceberg-maintainer/maintainer/internal/waiting"
)

// recorder is a waiting.Recorder that keeps what is in flight now and
// everything that ever was.
type recorder struct {
	mu       sync.Mutex
	inFlight map[int]string
	began    []string
}

func (r *recorder) Begin(what string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight == nil {
		r.inFlight = map[int]string{}
	}
	id := len(r.began)
	r.began = append(r.began, what)
	r.inFlight[id] = what
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.inFlight, id)
	}
}

func (r *recorder) now() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for _, w := range r.inFlight {
			if !yield(w) {
				return
			}
		}
	})
}

// An object-store request is recorded as waited on in the recorder of its
// context from when it is sent until its body has been read, through the
// maintainer's client and through iceberg-go's IO opened under the ambient
// config (whose requests carry the context the IO was opened with); a
// request that failed is not waited on any more.
func TestRequestsAreRecordedWhileInFlight(t *testing.T) {
	release := make(chan struct{})
	url := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "10")
			return
		}
		if r.URL.Path == "/b/missing" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("12345"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("67890"))
	})
	props := map[string]string{PropS3Endpoint: url, PropS3AccessKeyID: "k", PropS3SecretAccessKey: "s", PropS3Region: "us-east-1"}
	ctx, s := settings(t, Config{RequestTimeout: 10 * time.Second, MaxAttempts: 1}, props, nil)
	want := "object store: GET " + url + "/b/k?x-id=GetObject"

	for _, tc := range []struct {
		name string
		open func(t *testing.T, rec *recorder) io.ReadCloser
	}{
		{"maintainer's client", func(t *testing.T, rec *recorder) io.ReadCloser {
			out, err := s.Client().GetObject(waiting.With(ctx, rec), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			if err != nil {
				t.Fatal(err)
			}
			return out.Body
		}},
		{"iceberg-go's IO", func(t *testing.T, rec *recorder) io.ReadCloser {
			fs, err := iceio.LoadFS(waiting.With(ctx, rec), props, "s3://b/k")
			if err != nil {
				t.Fatal(err)
			}
			f, err := fs.Open("s3://b/k")
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			body := tc.open(t, rec)
			done := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(body)
				done <- err
			}()
			// The body is half sent: the request is still waited on.
			if got := rec.now(); !slices.Contains(got, want) {
				t.Errorf("while the body is pending, in flight: %q; want %q among them", got, want)
			}
			release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			body.Close()
			if got := rec.now(); len(got) != 0 {
				t.Errorf("after the body was read, still in flight: %q", got)
			}
			if !slices.Contains(rec.began, want) {
				t.Errorf("recorded %q; want %q", rec.began, want)
			}
		})
	}

	rec := &recorder{}
	if _, err := s.Client().GetObject(waiting.With(ctx, rec), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("missing")}); err == nil {
		t.Fatal("GET of a forbidden object succeeded")
	}
	if got := rec.now(); len(got) != 0 || len(rec.began) == 0 {
		t.Errorf("after a failed request: began %q, still in flight %q; want it begun and ended", rec.began, got)
	}
}
