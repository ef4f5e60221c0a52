package blob

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/redact"
)

// Defaults applied by Open for zero Config fields.
const (
	// DefaultPartSize is the multipart part size, and the largest object sent in a single PUT.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part size S3 accepts (except for the last part).
	MinPartSize = 5 << 20
	// DefaultTransferTimeout bounds a whole Put or Get (including reading the body) on S3.
	DefaultTransferTimeout = 5 * time.Minute
	// DefaultOpTimeout bounds every other S3 call: Stat, Delete, one page of List, the bucket check.
	DefaultOpTimeout = 30 * time.Second
	// DefaultUploadThreads is how many parts of one multipart upload are sent in parallel.
	DefaultUploadThreads = 4
	// DefaultChecksum is the checksum minio-go sends with every upload (full-object CRC-64/NVME).
	DefaultChecksum = "crc64nvme"
)

// Config holds the settings of Open. The zero value is usable: the S3 fields fall back to the
// environment variables named on each field, and the durations and sizes to the defaults above.
type Config struct {
	// DefaultDir is the local directory used when the URL is empty. The services pass
	// "<data>/blobs".
	DefaultDir string

	// Endpoint is the S3 server: "http://host:port", "https://host" or "host:port" (the scheme
	// decides TLS; no scheme means TLS). Fallbacks: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
	// S3_ENDPOINT, MINIO_ENDPOINT; without any, Amazon S3 (https://s3.amazonaws.com).
	Endpoint string
	// Region is the bucket's region. Fallbacks: AWS_REGION, AWS_DEFAULT_REGION; without any,
	// minio-go asks the server for the bucket's location once and caches it.
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are the credentials. Fallbacks, as pairs in
	// this order: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (+AWS_SESSION_TOKEN),
	// MINIO_ACCESS_KEY/MINIO_SECRET_KEY, MINIO_ROOT_USER/MINIO_ROOT_PASSWORD; then the shared
	// credentials file (~/.aws/credentials or AWS_SHARED_CREDENTIALS_FILE, profile AWS_PROFILE).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PathStyle forces path-style requests (http://host/bucket/key) instead of virtual-host
	// style (http://bucket.host/key). Fallback: S3_FORCE_PATH_STYLE=true. When false minio-go
	// chooses: virtual-host style for Amazon and Google endpoints, path style elsewhere (MinIO).
	PathStyle bool
	// CreateBucket creates the bucket when it does not exist instead of failing with
	// ErrBucketNotFound. Fallback: CODAPIPE_CREATE_BUCKET=true (CreateBucketEnv), which every
	// command honours.
	CreateBucket bool

	// PartSize is the multipart part size in bytes (default 16 MiB, at least 5 MiB). Objects up
	// to this size go in one PUT; larger ones in parts of this size (UploadThreads at a time,
	// each held in memory while it is sent).
	PartSize int64
	// Checksum is the checksum minio-go computes for each upload and the server verifies:
	// "crc64nvme" (default; a full-object checksum even for multipart uploads), "crc32c",
	// "crc32", "sha256", "sha1", or "none" (which also turns off trailing headers, for S3
	// implementations that reject them).
	Checksum string
	// UploadThreads is how many parts of one multipart upload are in flight at once (default 4;
	// 1 sends them one after another). Each holds one part in memory.
	UploadThreads int
	// MaxRetries is how many times minio-go tries a request (default 10; 1 disables retries).
	// Transport errors, 5xx, 408, 429 and throttling codes are retried with exponential backoff
	// (200 ms unit, capped at 1 s, jittered), always within the operation's deadline.
	MaxRetries int
	// TransferTimeout is the deadline of a Put, PutFile or Get on S3, from the call until the
	// upload completes or the returned reader is closed (default 5 min). Raise it for multi-GiB
	// objects.
	TransferTimeout time.Duration
	// OpTimeout is the deadline of Stat, Delete, the bucket check of Open, and of each page of
	// up to 1000 keys of List (default 30 s).
	OpTimeout time.Duration
	// TempDir is where Store.Put spools content before uploading it to S3 (default
	// os.TempDir()). The local backend spools inside its own directory.
	TempDir string
	// Transport, when set, replaces minio-go's HTTP transport (custom TLS roots, proxies,
	// tracing in tests).
	Transport http.RoundTripper
	// Logger receives debug and warning messages (default slog.Default()).
	Logger *slog.Logger
	// Getenv replaces os.Getenv for the fallbacks above (tests).
	Getenv func(string) string
}

// CreateBucketEnv is the variable that has every command create a missing bucket
// (Config.CreateBucket): true, 1 or yes.
const CreateBucketEnv = "CODAPIPE_CREATE_BUCKET"

// createBucket reports whether a missing bucket is created.
func (c Config) createBucket() bool {
	if c.CreateBucket {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(c.getenv(CreateBucketEnv))) {
	case "1", "true", "yes":
		return true
	}
	return false
}

func (c Config) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

func (c Config) transferTimeout() time.Duration {
	if c.TransferTimeout > 0 {
		return c.TransferTimeout
	}
	return DefaultTransferTimeout
}

func (c Config) opTimeout() time.Duration {
	if c.OpTimeout > 0 {
		return c.OpTimeout
	}
	return DefaultOpTimeout
}

// SecretEnv are the environment variables whose values are S3 secrets
// (secret keys, session tokens, passwords), KeyIDEnv those whose values
// identify the key (access key IDs, the MinIO root user: identifiers,
// which S3 itself prints, not secrets), and EndpointEnv those that name
// the S3 endpoint (whose user information, if any, is a credential):
// what a command strips from its output (redact.Secrets).
var (
	SecretEnv   = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MINIO_SECRET_KEY", "MINIO_ROOT_PASSWORD"}
	KeyIDEnv    = []string{"AWS_ACCESS_KEY_ID", "MINIO_ACCESS_KEY", "MINIO_ROOT_USER"}
	EndpointEnv = []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT", "MINIO_ENDPOINT"}
)

// s3Settings is a Config resolved against the environment.
type s3Settings struct {
	endpointHost string // host[:port]
	secure       bool
	endpointURL  string // scheme://host[:port], for messages
	region       string
	accessKey    string
	secretKey    string
	sessionToken string
	credSource   string // where the credentials came from, for messages; "" when none found
	pathStyle    bool
	partSize     int64
	checksum     string
}

// resolveS3 applies the environment fallbacks and defaults and validates the result.
func (c Config) resolveS3() (s3Settings, error) {
	var s s3Settings
	endpoint := c.Endpoint
	for _, k := range EndpointEnv {
		if endpoint != "" {
			break
		}
		endpoint = c.getenv(k)
	}
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	host, secure, err := parseEndpoint(endpoint)
	if err != nil {
		return s, err
	}
	s.endpointHost, s.secure = host, secure
	s.endpointURL = "http://" + host
	if secure {
		s.endpointURL = "https://" + host
	}

	s.region = c.Region
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if s.region != "" {
			break
		}
		s.region = c.getenv(k)
	}

	switch {
	case c.AccessKeyID != "" || c.SecretAccessKey != "":
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return s, fmt.Errorf("blob: s3 credentials: Config has only one of AccessKeyID and SecretAccessKey")
		}
		s.accessKey, s.secretKey, s.sessionToken, s.credSource = c.AccessKeyID, c.SecretAccessKey, c.SessionToken, "Config"
	default:
		pairs := [][3]string{
			{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"},
			{"MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", ""},
			{"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", ""},
		}
		for _, p := range pairs {
			id, secret := c.getenv(p[0]), c.getenv(p[1])
			if id == "" && secret == "" {
				continue
			}
			if id == "" || secret == "" {
				return s, fmt.Errorf("blob: s3 credentials: %s and %s must both be set", p[0], p[1])
			}
			s.accessKey, s.secretKey, s.credSource = id, secret, p[0]+"/"+p[1]
			if p[2] != "" {
				s.sessionToken = c.getenv(p[2])
			}
			break
		}
	}

	s.pathStyle = c.PathStyle
	if !s.pathStyle {
		if v := c.getenv("S3_FORCE_PATH_STYLE"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, fmt.Errorf("blob: S3_FORCE_PATH_STYLE=%q: want true or false", v)
			}
			s.pathStyle = b
		}
	}

	s.partSize = c.PartSize
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.partSize < MinPartSize || s.partSize > 5<<30 {
		return s, fmt.Errorf("blob: PartSize %d: want between 5 MiB and 5 GiB", s.partSize)
	}
	s.checksum = strings.ToLower(c.Checksum)
	if s.checksum == "" {
		s.checksum = DefaultChecksum
	}
	if _, ok := checksumTypes[s.checksum]; !ok {
		return s, fmt.Errorf("blob: Checksum %q: want one of crc64nvme, crc32c, crc32, sha256, sha1, none", c.Checksum)
	}
	return s, nil
}

// parseEndpoint accepts "http://host:port", "https://host[:port]" or "host[:port]" (TLS) and
// returns the host[:port] and whether to use TLS.
func parseEndpoint(e string) (host string, secure bool, err error) {
	if !strings.Contains(e, "://") {
		e = "https://" + e
	}
	u, err := redact.ParseURL("blob: s3 endpoint", e)
	if err != nil {
		return "", false, err
	}
	raw := redact.Shown(u)
	switch u.Scheme {
	case "http":
	case "https":
		secure = true
	default:
		return "", false, fmt.Errorf("blob: s3 endpoint %q: scheme must be http or https", raw)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("blob: s3 endpoint %q: want scheme://host[:port] without path, query or user information (give the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", raw)
	}
	return u.Host, secure, nil
}
