package seaweed

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// PutModified stores objects (key -> body) in bucket with the modification
// time modified, which S3 itself cannot set: a PUT is stamped with the
// server's clock. It loads filer entries with that mtime and the body
// inline through `weed shell`'s fs.meta.load, so a test can plant files
// older than orphan removal's minimum age on a real server. LastModified
// has whole seconds.
func (s *Server) PutModified(t testing.TB, bucket string, modified time.Time, objects map[string][]byte) {
	t.Helper()
	if s.weed == "" || s.master == "" {
		skipOrFail(t, EnvWeed+" and "+EnvMaster+" are not both set (scripts/test.sh sets them), so objects cannot be back-dated")
	}
	var meta []byte
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range objects {
			if !yield(k) {
				return
			}
		}
	}) {
		entry := fullEntry(bucket, key, objects[key], modified)
		meta = binary.BigEndian.AppendUint32(meta, uint32(len(entry)))
		meta = append(meta, entry...)
	}
	file := filepath.Join(t.TempDir(), "objects.meta")
	if err := os.WriteFile(file, meta, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.weed, "shell", "-master="+s.master)
	cmd.Stdin = strings.NewReader("fs.meta.load -v=false " + file + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("seaweed: load %d back-dated objects into s3://%s through weed shell (master %s): %v\n%s",
			len(objects), bucket, s.master, err, out.String())
	}
}

// fullEntry is the filer's FullEntry protobuf message (weed/pb/filer.proto)
// of a file s3://bucket/key holding body inline, modified at mtime.
func fullEntry(bucket, key string, body []byte, mtime time.Time) []byte {
	sum := md5.Sum(body)
	var attrs []byte
	attrs = appendVarint(attrs, 1, uint64(len(body)))    // file_size
	attrs = appendVarint(attrs, 2, uint64(mtime.Unix())) // mtime, seconds
	attrs = appendVarint(attrs, 3, 0o660)                // file_mode
	attrs = appendVarint(attrs, 6, uint64(mtime.Unix())) // crtime
	attrs = appendBytes(attrs, 7, []byte("application/octet-stream"))
	attrs = appendBytes(attrs, 14, sum[:]) // md5: the ETag
	var entry []byte
	entry = appendBytes(entry, 1, []byte(path.Base(key))) // name
	entry = appendBytes(entry, 4, attrs)                  // attributes
	entry = appendBytes(entry, 9, body)                   // content
	var full []byte
	full = appendBytes(full, 1, []byte(path.Join("/buckets", bucket, path.Dir(key)))) // dir
	full = appendBytes(full, 2, entry)
	return full
}

// appendVarint appends field num as a varint (protobuf wire type 0).
func appendVarint(b []byte, num int, v uint64) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3)
	return binary.AppendUvarint(b, v)
}

// appendBytes appends field num as length-delimited bytes (wire type 2).
func appendBytes(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
