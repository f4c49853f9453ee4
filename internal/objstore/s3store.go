package objstore

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// MaxDeleteBatch is the most keys one S3 DeleteObjects call accepts.
const MaxDeleteBatch = 1000

// S3API is the part of *s3.Client that S3Store uses.
type S3API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// S3Store lists with paginated ListObjectsV2 and deletes with DeleteObjects.
// The top levels below the listed prefix (the table folder and its
// children: data/, metadata/, partition folders) are listed with a "/"
// delimiter, so hidden folders there are never listed and their siblings
// are listed in parallel; deeper levels are listed flat.
type S3Store struct {
	client S3API
	// PageSize is MaxKeys of each ListObjectsV2 call; 0 = the server's
	// default (1000 on S3).
	PageSize int32
	// DelimiterDepth is how many folder levels are listed with a delimiter
	// before switching to flat listings; 0 = 2.
	DelimiterDepth int
}

// NewS3Store returns a store over client.
func NewS3Store(client S3API) *S3Store { return &S3Store{client: client} }

type s3Prefix struct {
	scheme, bucket, key string
}

// parseS3 splits scheme://bucket/key; the key is kept as written (object
// keys are opaque: "a//b" and "a/b" are different objects).
func parseS3(location string) (s3Prefix, error) {
	scheme, rest, ok := strings.Cut(location, "://")
	if !ok || !isS3Scheme(strings.ToLower(scheme)) {
		return s3Prefix{}, fmt.Errorf("%q is not an s3://, s3a:// or s3n:// location", location)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return s3Prefix{}, fmt.Errorf("%q names no bucket", location)
	}
	return s3Prefix{scheme: strings.ToLower(scheme), bucket: bucket, key: key}, nil
}

// isS3Scheme: the schemes an S3Store serves (Hadoop's s3a and s3n too).
func isS3Scheme(scheme string) bool {
	return scheme == "s3" || scheme == "s3a" || scheme == "s3n"
}

func (p s3Prefix) location(key string) string {
	return p.scheme + "://" + p.bucket + "/" + key
}

// List lists every object under prefix.
func (s *S3Store) List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[FileInfo, error] {
	return func(yield func(FileInfo, error) bool) {
		root, err := parseS3(prefix)
		if err != nil {
			yield(FileInfo{}, err)
			return
		}
		if root.key != "" && !strings.HasSuffix(root.key, "/") {
			root.key += "/"
		}
		depth := s.DelimiterDepth
		if depth <= 0 {
			depth = 2
		}
		outer := ctx
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type item struct {
			fi  FileInfo
			err error
		}
		out := make(chan item, 1024)
		sem := make(chan struct{}, max(1, opts.Concurrency))
		var wg sync.WaitGroup
		send := func(it item) bool {
			select {
			case out <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		var list func(key string, level int)
		list = func(key string, level int) {
			defer wg.Done()
			in := &s3.ListObjectsV2Input{Bucket: aws.String(root.bucket), Prefix: aws.String(key)}
			if s.PageSize > 0 {
				in.MaxKeys = aws.Int32(s.PageSize)
			}
			if level < depth {
				in.Delimiter = aws.String("/")
			}
			p := s3.NewListObjectsV2Paginator(s.client, in)
			for p.HasMorePages() {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				page, err := p.NextPage(ctx)
				<-sem
				if err != nil {
					send(item{err: fmt.Errorf("list s3://%s/%s: %w", root.bucket, key, err)})
					cancel()
					return
				}
				for _, o := range page.Contents {
					k := aws.ToString(o.Key)
					if strings.HasSuffix(k, "/") {
						continue // folder marker, not a file
					}
					if !send(item{fi: FileInfo{Path: root.location(k), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}}) {
						return
					}
				}
				for _, cp := range page.CommonPrefixes {
					sub := aws.ToString(cp.Prefix)
					dir := strings.TrimSuffix(root.location(sub), "/")
					if opts.SkipDir != nil && opts.SkipDir(dir) {
						if !send(item{fi: FileInfo{Path: dir, Dir: true}}) {
							return
						}
						continue
					}
					wg.Add(1)
					go list(sub, level+1)
				}
			}
		}
		wg.Add(1)
		go list(root.key, 0)
		go func() {
			wg.Wait()
			close(out)
		}()
		done := false
		for it := range out {
			if it.err != nil {
				yield(FileInfo{}, it.err)
				done = true
				cancel()
				break
			}
			if !yield(it.fi, nil) {
				done = true
				cancel()
				break
			}
		}
		for range out { // let the listers finish
		}
		if err := outer.Err(); err != nil && !done {
			// A lister that saw the cancellation may have stopped quietly.
			yield(FileInfo{}, fmt.Errorf("list %s: %w", prefix, err))
		}
	}
}

// Delete removes paths with DeleteObjects calls of at most MaxDeleteBatch
// keys each (one call for a batch Execute hands over).
func (s *S3Store) Delete(ctx context.Context, paths []string) ([]string, map[string]error) {
	failed := map[string]error{}
	var deleted []string
	type target struct {
		bucket string
		keys   []string
		paths  map[string]string // key -> path
	}
	byBucket := map[string]*target{}
	var order []string
	for _, p := range paths {
		sp, err := parseS3(p)
		if err != nil || sp.key == "" {
			failed[p] = fmt.Errorf("not an object location: %v", err)
			continue
		}
		t := byBucket[sp.bucket]
		if t == nil {
			t = &target{bucket: sp.bucket, paths: map[string]string{}}
			byBucket[sp.bucket] = t
			order = append(order, sp.bucket)
		}
		t.keys = append(t.keys, sp.key)
		t.paths[sp.key] = p
	}
	for _, b := range order {
		t := byBucket[b]
		for start := 0; start < len(t.keys); start += MaxDeleteBatch {
			keys := t.keys[start:min(len(t.keys), start+MaxDeleteBatch)]
			if err := ctx.Err(); err != nil {
				for _, k := range keys {
					failed[t.paths[k]] = err
				}
				continue
			}
			objs := make([]s3types.ObjectIdentifier, len(keys))
			for i, k := range keys {
				objs[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
			}
			resp, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: aws.String(t.bucket),
				Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(true)},
			})
			if err != nil {
				for _, k := range keys {
					failed[t.paths[k]] = fmt.Errorf("DeleteObjects: %w", err)
				}
				continue
			}
			bad := map[string]bool{}
			for _, e := range resp.Errors {
				k := aws.ToString(e.Key)
				if p, ok := t.paths[k]; ok {
					bad[k] = true
					failed[p] = fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message))
				}
			}
			for _, k := range keys {
				if !bad[k] {
					deleted = append(deleted, t.paths[k])
				}
			}
		}
	}
	return deleted, failed
}
