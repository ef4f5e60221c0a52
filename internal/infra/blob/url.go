package blob

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Location is a parsed blob store URL.
type Location struct {
	// Scheme is "file" (a local directory) or "s3".
	Scheme string
	// Dir is the absolute, cleaned directory of a "file" location.
	Dir string
	// Bucket is the bucket of an "s3" location.
	Bucket string
	// Prefix is the key prefix inside the bucket of an "s3" location, without leading or
	// trailing slashes; "" for the whole bucket.
	Prefix string
}

// String returns the canonical URL: file:///abs/dir, s3://bucket or s3://bucket/prefix.
func (l Location) String() string {
	switch l.Scheme {
	case "file":
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(l.Dir)}).String()
	case "s3":
		if l.Prefix == "" {
			return "s3://" + l.Bucket
		}
		return "s3://" + l.Bucket + "/" + l.Prefix
	}
	return ""
}

// IsPath reports whether ParseURL reads raw as a path (a local directory
// named without a URL scheme) rather than as a URL.
func IsPath(raw string) bool {
	return !strings.Contains(raw, "://") && !strings.HasPrefix(raw, "file:")
}

// ParseURL parses a blob store location:
//
//	""                      the default directory (defaultDir; an error when it is empty too)
//	/abs/dir, rel/dir       a local directory (relative paths are made absolute)
//	file:///abs/dir         a local directory (file://localhost/abs/dir also)
//	s3://bucket             a whole S3 bucket
//	s3://bucket/prefix/     keys under prefix/ in the bucket
//
// Query strings, fragments, user info and other schemes are rejected.
func ParseURL(raw, defaultDir string) (Location, error) {
	if raw == "" {
		if defaultDir == "" {
			return Location{}, fmt.Errorf("blob: no store URL and no default directory")
		}
		raw = defaultDir
	}
	if IsPath(raw) {
		return localLocation(raw, raw)
	}
	u, err := redact.ParseURL("blob: store URL", raw)
	if err != nil {
		return Location{}, err
	}
	shown := redact.Shown(u) // for messages: never the credentials
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return Location{}, fmt.Errorf("blob: store URL %q: query, fragment and user info are not supported (configure S3 with Config or the environment)", shown)
	}
	switch u.Scheme {
	case "file":
		if u.Opaque != "" {
			return Location{}, fmt.Errorf("blob: store URL %q: want file:///absolute/path", shown)
		}
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("blob: store URL %q: remote file hosts are not supported", shown)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return Location{}, fmt.Errorf("blob: store URL %q: want file:///absolute/path", shown)
		}
		return localLocation(raw, filepath.FromSlash(u.Path))
	case "s3":
		if u.Host == "" {
			return Location{}, fmt.Errorf("blob: store URL %q: missing bucket (want s3://bucket/prefix)", shown)
		}
		if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
			return Location{}, fmt.Errorf("blob: store URL %q: bucket %q: %w", shown, u.Host, err)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			if err := ValidateKey(prefix); err != nil {
				return Location{}, fmt.Errorf("blob: store URL %q: prefix: %w", shown, err)
			}
		}
		return Location{Scheme: "s3", Bucket: u.Host, Prefix: prefix}, nil
	default:
		return Location{}, fmt.Errorf("blob: store URL %q: unsupported scheme %q (want a path, file:///path or s3://bucket/prefix)", shown, u.Scheme)
	}
}

func localLocation(raw, path string) (Location, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Location{}, fmt.Errorf("blob: store URL %q: %w", raw, err)
	}
	return Location{Scheme: "file", Dir: abs}, nil
}

// OpenBucket opens the named-object layer at rawURL (see ParseURL; "" means cfg.DefaultDir).
// A local directory is created if needed. For S3 the bucket is checked once, within
// cfg.OpTimeout: a missing bucket (unless cfg.CreateBucket), wrong credentials or an unreachable
// endpoint fail here with an error naming the endpoint, the bucket and what to check.
func OpenBucket(ctx context.Context, rawURL string, cfg Config) (Bucket, error) {
	loc, err := ParseURL(rawURL, cfg.DefaultDir)
	if err != nil {
		return nil, err
	}
	switch loc.Scheme {
	case "file":
		return openLocal(loc.Dir, cfg)
	default:
		return openS3(ctx, loc, cfg)
	}
}

// Open opens the content-addressed store at rawURL; see OpenBucket. Store.Bucket gives the
// named-object layer of the same location.
func Open(ctx context.Context, rawURL string, cfg Config) (*Store, error) {
	b, err := OpenBucket(ctx, rawURL, cfg)
	if err != nil {
		return nil, err
	}
	return newStore(b, cfg), nil
}
