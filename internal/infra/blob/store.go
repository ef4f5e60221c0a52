package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"strings"
)

// keyPrefix is the part of the key space that holds content-addressed objects.
const keyPrefix = "sha256/"

// Key returns the bucket key of the content with the given SHA-256:
// "sha256/<first two hex digits>/<all 64 hex digits>".
func Key(sha256Hex string) string {
	if len(sha256Hex) < 2 {
		return keyPrefix + sha256Hex
	}
	return keyPrefix + sha256Hex[:2] + "/" + sha256Hex
}

// ParseKey returns the SHA-256 named by a content-addressed key, and whether key is one.
func ParseKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || len(rest) != 3+64 || rest[2] != '/' || rest[:2] != rest[3:5] || !validSHA256(rest[3:]) {
		return "", false
	}
	return rest[3:], true
}

// validSHA256 reports whether s is 64 lower-case hex digits.
func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// spooler is implemented by the backends: Store.Put writes content to a temporary file from
// newSpool while hashing it, then hands the file to commitSpool, which stores it under key
// (a rename for the local backend, an upload for S3) and always closes and removes it.
type spooler interface {
	newSpool() (*os.File, error)
	commitSpool(ctx context.Context, key string, f *os.File, size int64, sum string) (Info, error)
}

// genericSpool spools any Bucket through a temporary file in a directory.
type genericSpool struct {
	b   Bucket
	dir string
}

func (g genericSpool) newSpool() (*os.File, error) { return os.CreateTemp(g.dir, "codapipe-blob-*") }

func (g genericSpool) commitSpool(ctx context.Context, key string, f *os.File, size int64, sum string) (Info, error) {
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, err
	}
	return g.b.Put(ctx, key, f, size, PutOptions{SHA256: sum})
}

// Store is the content-addressed store: content is named by its SHA-256 and stored once, under
// Key(sha256) in a Bucket. It is safe for concurrent use.
type Store struct {
	b     Bucket
	spool spooler
	log   *slog.Logger
}

// NewStore returns a Store over b. Open is the usual constructor; NewStore serves a Bucket
// obtained elsewhere. cfg.TempDir and cfg.Logger are used when b is not one of this package's
// backends.
func NewStore(b Bucket, cfg Config) *Store { return newStore(b, cfg) }

func newStore(b Bucket, cfg Config) *Store {
	s := &Store{b: b, log: cfg.logger()}
	if sp, ok := b.(spooler); ok {
		s.spool = sp
	} else {
		dir := cfg.TempDir
		if dir == "" {
			dir = os.TempDir()
		}
		s.spool = genericSpool{b: b, dir: dir}
	}
	return s
}

// Bucket returns the named-object layer the store lives in (the same location; the store's
// objects are under "sha256/").
func (s *Store) Bucket() Bucket { return s.b }

// String describes the location.
func (s *Store) String() string { return s.b.String() }

// Put stores the content of r and returns its Ref. The content streams through a temporary
// file while it is hashed (in the store's directory for the local backend, in Config.TempDir for
// S3), so large content is never held in memory. If the store already holds an object of that
// hash and size, nothing is written or uploaded; an object of that name with a different size is
// corrupt and is replaced.
func (s *Store) Put(ctx context.Context, r io.Reader) (Ref, error) {
	f, err := s.spool.newSpool()
	if err != nil {
		return Ref{}, opError("put", "(content)", fmt.Errorf("spool: %w", err))
	}
	discard := func() {
		f.Close()
		os.Remove(f.Name())
	}
	h := newHashReader(ctx, r, -1, "")
	if _, err := copyBuffered(f, h); err != nil {
		discard()
		return Ref{}, opError("put", "(content)", err)
	}
	ref := Ref{SHA256: h.sum(), Size: h.n}
	key := Key(ref.SHA256)
	var statErr error
	if s.exists(ctx, key, ref.Size, &statErr) {
		discard()
		return ref, nil
	}
	if statErr != nil {
		discard()
		return Ref{}, statErr
	}
	if _, err := s.spool.commitSpool(ctx, key, f, ref.Size, ref.SHA256); err != nil {
		return Ref{}, wrapOnce("put", key, err)
	}
	return ref, nil
}

// PutBytes stores b, which the caller already holds in memory (a screenshot), and returns its
// Ref. Like Put it is a no-op when the content is already stored.
func (s *Store) PutBytes(ctx context.Context, b []byte) (Ref, error) {
	ref := Ref{SHA256: SumSHA256(b), Size: int64(len(b))}
	key := Key(ref.SHA256)
	var err error
	if s.exists(ctx, key, ref.Size, &err) {
		return ref, nil
	}
	if err != nil {
		return Ref{}, err
	}
	if _, err := s.b.Put(ctx, key, bytes.NewReader(b), ref.Size, PutOptions{SHA256: ref.SHA256}); err != nil {
		return Ref{}, err
	}
	return ref, nil
}

// exists reports whether key holds an object of the given size. Any error other than not-found
// is stored in *errp.
func (s *Store) exists(ctx context.Context, key string, size int64, errp *error) bool {
	info, err := s.b.Stat(ctx, key)
	switch {
	case err == nil && info.Size == size:
		return true
	case err == nil:
		s.log.Warn("blob: replacing a corrupt object", "key", key, "size", info.Size, "want", size, "store", s.b.String())
	case !errors.Is(err, ErrNotFound):
		*errp = err
	}
	return false
}

// wrapOnce adds the operation and key unless err already carries this package's prefix.
func wrapOnce(op, key string, err error) error {
	if strings.HasPrefix(err.Error(), "blob: ") {
		return err
	}
	return opError(op, key, err)
}

// checkHash normalises and validates a SHA-256 argument.
func checkHash(op, sha256Hex string) (string, error) {
	h := strings.ToLower(sha256Hex)
	if !validSHA256(h) {
		return "", opError(op, Key(sha256Hex), fmt.Errorf("%w: %q is not a hex SHA-256", ErrInvalidKey, sha256Hex))
	}
	return h, nil
}

// Get opens the content with the given SHA-256 (hex; upper case is accepted). The reader verifies
// the content while it is read and returns an error wrapping ErrChecksumMismatch instead of
// io.EOF when it does not match its hash; a caller that stops reading before EOF gets no
// verification. A missing hash gives an error wrapping ErrNotFound. The caller must close the
// reader.
func (s *Store) Get(ctx context.Context, sha256Hex string) (io.ReadCloser, error) {
	h, err := checkHash("get", sha256Hex)
	if err != nil {
		return nil, err
	}
	rc, info, err := s.b.Get(ctx, Key(h))
	if err != nil {
		return nil, err
	}
	if v, ok := rc.(*verifyingReadCloser); ok {
		v.hr.wantSHA = h // verify against the name, whatever metadata says
		return v, nil
	}
	return newVerifyingReadCloser(rc, "get", Key(h), info.Size, h, nil), nil
}

// GetBytes returns the verified content with the given SHA-256. Content that does not match its
// hash is read a second time (bytes damaged on the way read right the next time); a second
// mismatch is damage in the store, which no later read repairs: its error wraps
// ErrChecksumMismatch and callers treat it as permanent (Damaged).
func (s *Store) GetBytes(ctx context.Context, sha256Hex string) ([]byte, error) {
	b, err := s.getBytes(ctx, sha256Hex)
	if errors.Is(err, ErrChecksumMismatch) && ctx.Err() == nil {
		b, err = s.getBytes(ctx, sha256Hex)
		if errors.Is(err, ErrChecksumMismatch) {
			err = fmt.Errorf("%w (read twice: the stored content is damaged)", err)
		}
	}
	return b, err
}

func (s *Store) getBytes(ctx context.Context, sha256Hex string) ([]byte, error) {
	rc, err := s.Get(ctx, sha256Hex)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Stat returns the Info of the content with the given SHA-256 (Info.SHA256 is the hash asked
// for), or an error wrapping ErrNotFound.
func (s *Store) Stat(ctx context.Context, sha256Hex string) (Info, error) {
	h, err := checkHash("stat", sha256Hex)
	if err != nil {
		return Info{}, err
	}
	info, err := s.b.Stat(ctx, Key(h))
	if err != nil {
		return Info{}, err
	}
	info.SHA256 = h
	return info, nil
}

// Delete removes the content with the given SHA-256; removing missing content is not an error.
// Nothing tracks references: deleting content that trajectories still name breaks them.
func (s *Store) Delete(ctx context.Context, sha256Hex string) error {
	h, err := checkHash("delete", sha256Hex)
	if err != nil {
		return err
	}
	return s.b.Delete(ctx, Key(h))
}

// List yields the stored content whose SHA-256 starts with hexPrefix ("" for all), in hash
// order, with Info.SHA256 set. An error is yielded once and ends the listing.
func (s *Store) List(ctx context.Context, hexPrefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		p := strings.ToLower(hexPrefix)
		if len(p) > 64 || strings.Trim(p, "0123456789abcdef") != "" {
			yield(Info{}, opError("list", keyPrefix+hexPrefix, fmt.Errorf("%w: %q is not a hex prefix", ErrInvalidKey, hexPrefix)))
			return
		}
		bp := keyPrefix + p
		if len(p) >= 2 {
			bp = Key(p)
		}
		for info, err := range s.b.List(ctx, bp) {
			if err != nil {
				yield(Info{}, err)
				return
			}
			h, ok := ParseKey(info.Key)
			if !ok {
				continue
			}
			info.SHA256 = h
			if !yield(info, nil) {
				return
			}
		}
	}
}
