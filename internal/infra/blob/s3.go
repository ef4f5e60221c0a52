package blob

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// checksumTypes maps Config.Checksum to minio-go's checksum types.
var checksumTypes = map[string]minio.ChecksumType{
	"crc64nvme": minio.ChecksumCRC64NVME,
	"crc32c":    minio.ChecksumCRC32C,
	"crc32":     minio.ChecksumCRC32,
	"sha256":    minio.ChecksumSHA256,
	"sha1":      minio.ChecksumSHA1,
	"none":      minio.ChecksumNone,
}

// metaSHA256 is the user-metadata key under which the SHA-256 is recorded; on the wire it is the
// header X-Amz-Meta-Sha256, and minio-go returns it in ObjectInfo.UserMetadata as "Sha256".
const metaSHA256 = "Sha256"

// listPage is how many keys one List page (one deadline) covers; a variable for tests.
var listPage = 1000

// s3Bucket stores objects in an S3 bucket under a key prefix.
type s3Bucket struct {
	client   *minio.Client
	core     minio.Core
	bucket   string
	prefix   string // "" or "some/prefix/"
	loc      Location
	set      s3Settings
	checksum minio.ChecksumType
	threads  int
	transfer time.Duration
	op       time.Duration
	tempDir  string
	log      *slog.Logger
}

func openS3(ctx context.Context, loc Location, cfg Config) (*s3Bucket, error) {
	set, err := cfg.resolveS3()
	if err != nil {
		return nil, err
	}
	var creds *credentials.Credentials
	if set.accessKey != "" {
		creds = credentials.NewStaticV4(set.accessKey, set.secretKey, set.sessionToken)
	} else {
		file := cfg.getenv("AWS_SHARED_CREDENTIALS_FILE")
		if file == "" {
			if home, err := os.UserHomeDir(); err == nil {
				file = filepath.Join(home, ".aws", "credentials")
			}
		}
		if _, err := os.Stat(file); file == "" || err != nil {
			return nil, fmt.Errorf("blob: open %s at %s: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or MINIO_ROOT_USER and MINIO_ROOT_PASSWORD), Config.AccessKeyID/SecretAccessKey, or a shared credentials file (%s)", loc, set.endpointURL, "~/.aws/credentials")
		}
		creds = credentials.NewFileAWSCredentials(file, cfg.getenv("AWS_PROFILE"))
		set.credSource = file
	}
	lookup := minio.BucketLookupAuto
	if set.pathStyle {
		lookup = minio.BucketLookupPath
	}
	sum := checksumTypes[set.checksum]
	client, err := minio.New(set.endpointHost, &minio.Options{
		Creds:           creds,
		Secure:          set.secure,
		Transport:       cfg.Transport,
		Region:          set.region,
		BucketLookup:    lookup,
		TrailingHeaders: sum.IsSet(),
		MaxRetries:      cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("blob: open %s at %s: %w", loc, set.endpointURL, err)
	}
	threads := cfg.UploadThreads
	if threads <= 0 {
		threads = DefaultUploadThreads
	}
	tempDir := cfg.TempDir
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	b := &s3Bucket{
		client:   client,
		core:     minio.Core{Client: client},
		bucket:   loc.Bucket,
		loc:      loc,
		set:      set,
		checksum: sum,
		threads:  threads,
		transfer: cfg.transferTimeout(),
		op:       cfg.opTimeout(),
		tempDir:  tempDir,
		log:      cfg.logger(),
	}
	if loc.Prefix != "" {
		b.prefix = loc.Prefix + "/"
	}
	if err := b.checkBucket(ctx, cfg.createBucket()); err != nil {
		return nil, err
	}
	return b, nil
}

// checkBucket verifies that the bucket exists and the credentials are accepted, creating the
// bucket when allowed.
func (b *s3Bucket) checkBucket(ctx context.Context, create bool) error {
	ctx, cancel := context.WithTimeout(ctx, b.op)
	defer cancel()
	ok, err := b.client.BucketExists(ctx, b.bucket)
	if err != nil {
		return b.wrap(ctx, "open", b.loc.String(), err)
	}
	if ok {
		return nil
	}
	if !create {
		return b.wrap(ctx, "open", b.loc.String(), minio.ErrorResponse{Code: minio.NoSuchBucket, BucketName: b.bucket})
	}
	err = b.client.MakeBucket(ctx, b.bucket, minio.MakeBucketOptions{Region: b.set.region})
	if err != nil {
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		return b.wrap(ctx, "create bucket", b.loc.String(), err)
	}
	b.log.Info("blob: created bucket", "bucket", b.bucket, "endpoint", b.set.endpointURL)
	return nil
}

func (b *s3Bucket) String() string { return b.loc.String() + " at " + b.set.endpointURL }

func (b *s3Bucket) name(key string) string { return b.prefix + key }

// wrap turns a minio-go or transport error into an error that names the operation, the key, the
// endpoint and bucket, and says what to check.
func (b *s3Bucket) wrap(ctx context.Context, op, key string, err error) error {
	where := fmt.Sprintf("bucket %q at %s", b.bucket, b.set.endpointURL)
	creds := "the credentials (" + b.set.credSource + ")"
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case minio.NoSuchKey, "NoSuchObject":
			return opError(op, key, ErrNotFound)
		case minio.NoSuchBucket:
			return fmt.Errorf("blob: %s %s: %w: %s; create it (mc mb, aws s3 mb, or "+CreateBucketEnv+"=true for codapipe to create it), and check the endpoint and the bucket name in the URL",
				op, key, ErrBucketNotFound, where)
		case "InvalidAccessKeyId":
			return fmt.Errorf("blob: %s %s: %w: %s does not know the access key id (InvalidAccessKeyId); check %s and the endpoint",
				op, key, ErrAccessDenied, b.set.endpointURL, creds)
		case "SignatureDoesNotMatch":
			if op == "open" {
				return fmt.Errorf("blob: %s %s: %w: %s rejected the request signature (SignatureDoesNotMatch): the secret key does not match the access key; check %s",
					op, key, ErrAccessDenied, where, creds)
			}
			// The credentials passed the check in Open: more likely the request was altered on
			// the way (a proxy rewriting it, or bytes corrupted in transit; over plain HTTP the
			// signature covers the body).
			return fmt.Errorf("blob: %s %s: %s rejected the request signature (SignatureDoesNotMatch): the request was %w (corrupted body, rewriting proxy) or %s changed",
				op, key, where, errInTransit, creds)
		case "ExpiredToken", "InvalidToken", "TokenRefreshRequired":
			return fmt.Errorf("blob: %s %s: %w: %s rejected the session token (%s); refresh %s (AWS_SESSION_TOKEN)",
				op, key, ErrAccessDenied, where, er.Code, creds)
		case "AccessDenied", "AllAccessDisabled":
			return fmt.Errorf("blob: %s %s: %w: %s denied the request (%s); check %s and that the bucket policy allows s3:GetObject, s3:PutObject, s3:ListBucket and s3:DeleteObject on %s",
				op, key, ErrAccessDenied, where, er.Code, creds, b.loc)
		case "AuthorizationHeaderMalformed", "InvalidRegion", "IllegalLocationConstraintException":
			return fmt.Errorf("blob: %s %s: %s: wrong region %q (%s: %s); set AWS_REGION or Config.Region",
				op, key, where, b.set.region, er.Code, er.Message)
		case "XAmzContentChecksumMismatch", "BadDigest", "InvalidDigest":
			return fmt.Errorf("blob: %s %s: %w: %s rejected the upload as %w (%s: %s)", op, key, ErrChecksumMismatch, where, errInTransit, er.Code, er.Message)
		}
		return fmt.Errorf("blob: %s %s: %s: %w", op, key, where, err)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("blob: %s %s: %s: no complete answer before the deadline (Config.OpTimeout / TransferTimeout): %w", op, key, where, err)
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fmt.Errorf("blob: %s %s: %s speaks plain HTTP: write the endpoint as http://host:port (an endpoint without a scheme means https): %w",
			op, key, b.set.endpointURL, err)
	}
	if msg := err.Error(); strings.Contains(msg, "x509: ") || strings.Contains(msg, "tls: ") {
		return fmt.Errorf("blob: %s %s: TLS with %s failed: check the server certificate and the trusted CAs (SSL_CERT_FILE, Config.Transport), or the scheme: %w",
			op, key, b.set.endpointURL, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("blob: %s %s: cannot reach %s: check the endpoint (Config.Endpoint, AWS_ENDPOINT_URL, S3_ENDPOINT, MINIO_ENDPOINT) and its scheme (http:// or https://): %w",
			op, key, b.set.endpointURL, err)
	}
	return fmt.Errorf("blob: %s %s: %s: %w", op, key, where, err)
}

// checkPut validates a key and PutOptions.
func checkPut(key string, opts PutOptions) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if opts.SHA256 != "" && !validSHA256(opts.SHA256) {
		return fmt.Errorf("PutOptions.SHA256 %q: want 64 lower-case hex digits", opts.SHA256)
	}
	return nil
}

// readerAtSeeker is what the retryable upload path needs from a source.
type readerAtSeeker interface {
	io.ReaderAt
	io.Seeker
}

func (b *s3Bucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error) {
	if err := checkPut(key, opts); err != nil {
		return Info{}, opError("put", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.transfer)
	defer cancel()
	// Seekable sources of known size (files, byte slices): hash first, then upload with the
	// SHA-256 recorded; uploads can then be retried.
	if ras, ok := r.(readerAtSeeker); ok && size >= 0 {
		off, err := ras.Seek(0, io.SeekCurrent)
		if err != nil {
			return Info{}, opError("put", key, err)
		}
		end, err := ras.Seek(0, io.SeekEnd)
		if err != nil {
			return Info{}, opError("put", key, err)
		}
		if _, err := ras.Seek(off, io.SeekStart); err != nil {
			return Info{}, opError("put", key, err)
		}
		if end-off != size {
			return Info{}, opError("put", key, fmt.Errorf("%w: the reader holds %d bytes, want %d", ErrChecksumMismatch, end-off, size))
		}
		return b.putSeekable(ctx, key, io.NewSectionReader(ras, off, size), size, opts, "")
	}
	// Small or unknown-size streams: read up to one part into memory; if that is all there is,
	// send it in one retryable PUT with the SHA-256 recorded.
	if size <= b.set.partSize {
		limit := b.set.partSize + 1
		if size >= 0 {
			limit = size + 1
		}
		buf, err := io.ReadAll(io.LimitReader(r, limit))
		if err != nil {
			return Info{}, opError("put", key, err)
		}
		n := int64(len(buf))
		switch {
		case size >= 0 && n > size:
			return Info{}, opError("put", key, fmt.Errorf("%w: content longer than the expected %d bytes", ErrChecksumMismatch, size))
		case size >= 0 && n < size:
			return Info{}, opError("put", key, fmt.Errorf("%w: got %d bytes, want %d", ErrChecksumMismatch, n, size))
		case n <= b.set.partSize:
			return b.putSeekable(ctx, key, io.NewSectionReader(bytes.NewReader(buf), 0, n), n, opts, "")
		}
		r = io.MultiReader(bytes.NewReader(buf), r)
	}
	return b.putStream(ctx, key, r, size, opts, opts.SHA256)
}

func (b *s3Bucket) PutFile(ctx context.Context, key, path string, opts PutOptions) (Info, error) {
	return putFile(ctx, b, key, path, opts)
}

// putSeekable uploads size bytes from a rewindable source. Unless the caller already computed
// the SHA-256 (known), it hashes the content first, so that the SHA-256 is verified against
// opts.SHA256 and recorded before anything is sent.
func (b *s3Bucket) putSeekable(ctx context.Context, key string, src *io.SectionReader, size int64, opts PutOptions, known string) (Info, error) {
	sum := known
	if sum == "" {
		h := newHashReader(ctx, src, size, opts.SHA256)
		if _, err := copyBuffered(io.Discard, h); err != nil {
			return Info{}, opError("put", key, err)
		}
		sum = h.sum()
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return Info{}, opError("put", key, err)
		}
	}
	// minio-go retries transport errors and 5xx, but not a request the server refused because
	// its body did not match its checksum or signature: bytes damaged on the way. The source can
	// be re-read, so try again, a few times.
	var err error
	for attempt := 1; attempt <= transitAttempts; attempt++ {
		if attempt > 1 {
			b.log.Warn("blob: upload damaged in transit, retrying", "key", key, "attempt", attempt, "err", err)
			if _, err := src.Seek(0, io.SeekStart); err != nil {
				return Info{}, opError("put", key, err)
			}
		}
		var info Info
		info, err = b.putSeekableOnce(ctx, key, src, size, opts, sum)
		if err == nil || !errors.Is(err, errInTransit) {
			return info, err
		}
	}
	return Info{}, err
}

// transitAttempts is how many times an upload from a rewindable source is tried when the server
// finds it damaged in transit.
const transitAttempts = 3

// errInTransit marks errors of requests that the server refused because their content did not
// match their checksum or signature.
var errInTransit = errors.New("damaged in transit")

func (b *s3Bucket) putSeekableOnce(ctx context.Context, key string, src *io.SectionReader, size int64, opts PutOptions, sum string) (Info, error) {
	if size > b.set.partSize {
		// Multipart. minio-go's parallel ReaderAt uploader wraps each part in a non-seekable
		// checksum reader when trailing headers are on, which disables its retries; the
		// streaming uploaders compute part checksums up front and retry each part.
		return b.putStream(ctx, key, src, size, opts, sum)
	}
	po := minio.PutObjectOptions{
		ContentType:  opts.ContentType,
		UserMetadata: map[string]string{metaSHA256: sum},
	}
	if b.checksum.IsSet() {
		// One PUT: send the SHA-256 computed above as the request's checksum, so the server
		// verifies the bytes against the content's name end to end. (Setting po.Checksum
		// instead would make minio-go hash the body again into a trailer.)
		raw, _ := hex.DecodeString(sum)
		po.UserMetadata["X-Amz-Checksum-Sha256"] = base64.StdEncoding.EncodeToString(raw)
	}
	ui, err := b.client.PutObject(ctx, b.bucket, b.name(key), src, size, po)
	if err != nil {
		return Info{}, b.wrap(ctx, "put", key, err)
	}
	return Info{Key: key, Size: size, SHA256: sum, ModTime: modTime(ui.LastModified)}, nil
}

// putStream uploads r as a multipart upload of unknown length (minio-go reads one part at a
// time, or b.threads parts in parallel). size, when known, is checked and sizes the parts;
// sum, when known, is recorded and verified: a mismatch surfaces as a read error before the last
// part is sent, and minio-go aborts the upload.
func (b *s3Bucket) putStream(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions, sum string) (Info, error) {
	h := newHashReader(ctx, r, size, sum) // hides ReaderAt: minio-go takes the streaming path
	po := minio.PutObjectOptions{
		ContentType: opts.ContentType,
		PartSize:    uint64(b.partSizeFor(size)),
		Checksum:    b.checksum,
	}
	if sum != "" {
		po.UserMetadata = map[string]string{metaSHA256: sum}
	}
	if b.threads > 1 {
		po.ConcurrentStreamParts = true
		po.NumThreads = uint(b.threads)
	}
	ui, err := b.client.PutObject(ctx, b.bucket, b.name(key), h, -1, po)
	if err != nil {
		if errors.Is(err, ErrChecksumMismatch) || errors.Is(err, context.Canceled) {
			return Info{}, opError("put", key, err)
		}
		return Info{}, b.wrap(ctx, "put", key, err)
	}
	if !h.done {
		// minio-go completed the upload without reading to EOF; never expected, but the
		// stored object then is not what the caller gave.
		b.deleteQuiet(key)
		return Info{}, opError("put", key, fmt.Errorf("upload completed before the end of the input"))
	}
	return Info{Key: key, Size: h.n, SHA256: h.sum(), ModTime: modTime(ui.LastModified)}, nil
}

// partSizeFor returns the part size: the configured one, raised (in MiB steps) when a known
// size would otherwise need more than 10000 parts.
func (b *s3Bucket) partSizeFor(size int64) int64 {
	ps := b.set.partSize
	if size > ps*10000 {
		ps = (size/10000 + 1 + (1<<20 - 1)) &^ (1<<20 - 1)
	}
	return ps
}

func (b *s3Bucket) deleteQuiet(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.op)
	defer cancel()
	if err := b.client.RemoveObject(ctx, b.bucket, b.name(key), minio.RemoveObjectOptions{}); err != nil {
		b.log.Warn("blob: could not remove a bad upload", "key", key, "err", err)
	}
}

// modTime returns t, or the current time when the server did not report one (single PUT and
// multipart completion responses carry no Last-Modified).
func modTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t
}

func (b *s3Bucket) info(key string, oi minio.ObjectInfo) Info {
	sum := strings.ToLower(oi.UserMetadata[metaSHA256])
	if !validSHA256(sum) {
		sum = ""
	}
	return Info{Key: key, Size: oi.Size, SHA256: sum, ModTime: oi.LastModified}
}

func (b *s3Bucket) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, opError("get", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.transfer)
	body, oi, _, err := b.core.GetObject(ctx, b.bucket, b.name(key), minio.GetObjectOptions{})
	if err != nil {
		err = b.wrap(ctx, "get", key, err)
		cancel()
		return nil, Info{}, err
	}
	info := b.info(key, oi)
	return newVerifyingReadCloser(body, "get", key, info.Size, info.SHA256, cancel), info, nil
}

func (b *s3Bucket) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, opError("stat", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.op)
	defer cancel()
	oi, err := b.client.StatObject(ctx, b.bucket, b.name(key), minio.StatObjectOptions{})
	if err != nil {
		return Info{}, b.wrap(ctx, "stat", key, err)
	}
	return b.info(key, oi), nil
}

func (b *s3Bucket) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return opError("delete", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.op)
	defer cancel()
	if err := b.client.RemoveObject(ctx, b.bucket, b.name(key), minio.RemoveObjectOptions{}); err != nil {
		if err := b.wrap(ctx, "delete", key, err); !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		if err := validatePrefix(prefix); err != nil {
			yield(Info{}, opError("list", prefix, err))
			return
		}
		after := ""
		for {
			page, last, err := b.listPage(ctx, prefix, after)
			if err != nil {
				yield(Info{}, err)
				return
			}
			for _, info := range page {
				if !yield(info, nil) {
					return
				}
			}
			if last == "" {
				return
			}
			after = last
		}
	}
}

// listPage reads up to listPage object names after the name after, within one OpTimeout, and
// returns the valid ones with the last name read when more may follow ("" at the end). The page
// is read completely before it is yielded, so a slow consumer does not eat the deadline.
func (b *s3Bucket) listPage(ctx context.Context, prefix, after string) (page []Info, last string, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.op)
	defer cancel()
	ch := b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{
		Prefix:     b.name(prefix),
		Recursive:  true,
		MaxKeys:    listPage,
		StartAfter: after,
	})
	defer func() {
		cancel()
		for range ch { // let minio-go's lister goroutine finish
		}
	}()
	n := 0
	for oi := range ch {
		if oi.Err != nil {
			return nil, "", b.wrap(ctx, "list", prefix, oi.Err)
		}
		n++
		key := strings.TrimPrefix(oi.Key, b.prefix)
		if ValidateKey(key) == nil { // skips "directory" markers and names this package never writes
			page = append(page, Info{Key: key, Size: oi.Size, ModTime: oi.LastModified})
		}
		if n == listPage {
			return page, oi.Key, nil
		}
	}
	return page, "", nil
}

// newSpool implements spooler: a temporary file in Config.TempDir.
func (b *s3Bucket) newSpool() (*os.File, error) {
	return os.CreateTemp(b.tempDir, "codapipe-blob-*")
}

// commitSpool implements spooler: it uploads the spooled file and removes it.
func (b *s3Bucket) commitSpool(ctx context.Context, key string, f *os.File, size int64, sum string) (Info, error) {
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.transfer)
	defer cancel()
	return b.putSeekable(ctx, key, io.NewSectionReader(f, 0, size), size, PutOptions{}, sum)
}
