package seaweed

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func put(t *testing.T, s *Server, bucket, key, body string) {
	t.Helper()
	_, err := s.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

func get(t *testing.T, s *Server, bucket, key string) string {
	t.Helper()
	out, err := s.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The shared server: buckets are fresh and distinct, keys are listed in
// full (past one page), and buckets are not created by a write.
func TestSharedBucketsAndKeys(t *testing.T) {
	s := Shared(t)
	a, b := s.Bucket(t), s.Bucket(t)
	if a == b {
		t.Fatalf("two buckets named %s", a)
	}
	if keys := s.Keys(t, a); len(keys) != 0 {
		t.Fatalf("fresh bucket %s holds %v", a, keys)
	}
	want := map[string]bool{}
	for i := range 1005 {
		key := "p/" + strings.Repeat("k", i%3+1) + "/" + time.Duration(i).String()
		want[key] = true
	}
	for k := range want {
		put(t, s, a, k, "x")
	}
	if got := s.Keys(t, a); !maps.Equal(got, want) {
		t.Fatalf("Keys(%s): %d keys, want %d", a, len(got), len(want))
	}
	if got := s.Keys(t, b); len(got) != 0 {
		t.Fatalf("Keys(%s) sees another bucket's keys: %d", b, len(got))
	}
	// -s3.autoCreateBucket=false: a write to a missing bucket fails.
	_, err := s.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(a + "-missing"), Key: aws.String("k"), Body: strings.NewReader("x")})
	var nsb *types.NoSuchBucket
	if err == nil || !(errors.As(err, &nsb) || strings.Contains(err.Error(), "NoSuchBucket")) {
		t.Fatalf("put into a missing bucket: %v, want NoSuchBucket", err)
	}
	if props := s.Props(); props["s3.endpoint"] != s.Endpoint || props["s3.path-style-access"] != "true" || props["s3.access-key-id"] != s.AccessKey {
		t.Errorf("Props: %v", props)
	}
}

// Back-dated objects list with the time given, read back with their body,
// and sit beside ordinary ones.
func TestSharedPutModified(t *testing.T) {
	s := Shared(t)
	bucket := s.Bucket(t)
	put(t, s, bucket, "wh/t/data/new.parquet", "new")
	old := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Second)
	s.PutModified(t, bucket, old, map[string][]byte{
		"wh/t/data/day=1/old.parquet": []byte("old data"),
		"wh/t/metadata/snap-1.avro":   []byte("old avro"),
		"top.txt":                     []byte("top"),
	})
	if got, want := slices.Sorted(maps.Keys(s.Keys(t, bucket))), []string{"top.txt", "wh/t/data/day=1/old.parquet", "wh/t/data/new.parquet", "wh/t/metadata/snap-1.avro"}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	out, err := s.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("wh/t/data/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		mod := aws.ToTime(o.LastModified)
		switch aws.ToString(o.Key) {
		case "wh/t/data/day=1/old.parquet":
			if !mod.Equal(old) || aws.ToInt64(o.Size) != int64(len("old data")) {
				t.Errorf("back-dated object: modified %s, size %d; want %s, %d", mod, aws.ToInt64(o.Size), old, len("old data"))
			}
		case "wh/t/data/new.parquet":
			if time.Since(mod) > time.Hour {
				t.Errorf("new object modified %s", mod)
			}
		}
	}
	if got := get(t, s, bucket, "wh/t/data/day=1/old.parquet"); got != "old data" {
		t.Errorf("back-dated object reads %q", got)
	}
}

// A private server: paused, a request waits (here until its deadline);
// resumed, it answers; stopped, requests are refused.
func TestStartPauseResumeStop(t *testing.T) {
	s := Start(t)
	bucket := s.Bucket(t)
	put(t, s, bucket, "a", "before")

	s.Pause(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err := s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("a")})
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get from a paused server: %v, want the deadline exceeded", err)
	}
	s.Resume(t)
	if got := get(t, s, bucket, "a"); got != "before" {
		t.Fatalf("after resume: %q", got)
	}

	s.Stop(t)
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("a")})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("get from a stopped server: %v, want connection refused", err)
	}
}

func TestBucketName(t *testing.T) {
	for _, test := range []string{"TestX", "TestA/sub_case#01", strings.Repeat("Long", 30), "___"} {
		name := bucketName(test)
		if len(name) < 3 || len(name) > 63 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
			strings.HasPrefix(name, "-") || strings.Contains(name, "--") {
			t.Errorf("bucketName(%q) = %q, not a valid bucket name", test, name)
		}
	}
}
