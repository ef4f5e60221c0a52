package blob

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		raw, def string
		want     Location
		err      string // substring of the error; "" for success
	}{
		{raw: "", def: "/data/blobs", want: Location{Scheme: "file", Dir: "/data/blobs"}},
		{raw: "", def: "", err: "no store URL and no default directory"},
		{raw: "/var/lib/codapipe/blobs/", want: Location{Scheme: "file", Dir: "/var/lib/codapipe/blobs"}},
		{raw: "rel/blobs", want: Location{Scheme: "file", Dir: filepath.Join(wd, "rel/blobs")}},
		{raw: "file:///srv/blobs", want: Location{Scheme: "file", Dir: "/srv/blobs"}},
		{raw: "file://localhost/srv/blobs", want: Location{Scheme: "file", Dir: "/srv/blobs"}},
		{raw: "file:///srv/with%20space", want: Location{Scheme: "file", Dir: "/srv/with space"}},
		{raw: "file://otherhost/srv", err: "remote file hosts"},
		{raw: "file:relative", err: "want file:///absolute/path"},
		{raw: "s3://bucket", want: Location{Scheme: "s3", Bucket: "bucket"}},
		{raw: "s3://bucket/", want: Location{Scheme: "s3", Bucket: "bucket"}},
		{raw: "s3://my-bucket/runs/nightly/", want: Location{Scheme: "s3", Bucket: "my-bucket", Prefix: "runs/nightly"}},
		{raw: "s3://", err: "missing bucket"},
		{raw: "s3://Bad_Bucket/x", err: `bucket "Bad_Bucket"`},
		{raw: "s3://bucket/../x", err: "prefix"},
		{raw: "s3://bucket/a//b", err: "prefix"},
		{raw: "s3://bucket/p?region=eu", err: "query"},
		{raw: "s3://user:pw@bucket/p", err: "user info"},
		{raw: "gs://bucket/p", err: `unsupported scheme "gs"`},
		{raw: "http://minio:9000/bucket", err: `unsupported scheme "http"`},
	}
	for _, tc := range tests {
		t.Run(cmp.Or(tc.raw, "empty,default="+tc.def), func(t *testing.T) {
			got, err := ParseURL(tc.raw, tc.def)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want an error containing %q", tc.raw, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
			}
			// The canonical form parses to the same location.
			again, err := ParseURL(got.String(), "")
			if err != nil || again != got {
				t.Errorf("round trip via %q = %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestResolveS3(t *testing.T) {
	type want struct {
		host, url, region, access, secret, token, source string
		secure, pathStyle                                bool
		partSize                                         int64
		checksum                                         string
	}
	tests := []struct {
		name string
		cfg  Config
		env  map[string]string
		want want
		err  string
	}{
		{name: "defaultsToAWS", env: map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TOK", "AWS_REGION": "eu-west-1"},
			want: want{host: "s3.amazonaws.com", url: "https://s3.amazonaws.com", secure: true, region: "eu-west-1", access: "AK", secret: "SK", token: "TOK", source: "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "httpSchemeNoTLS", env: map[string]string{"AWS_ENDPOINT_URL": "http://minio:9000", "MINIO_ROOT_USER": "u", "MINIO_ROOT_PASSWORD": "p"},
			want: want{host: "minio:9000", url: "http://minio:9000", access: "u", secret: "p", source: "MINIO_ROOT_USER/MINIO_ROOT_PASSWORD", partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "noSchemeMeansTLS", env: map[string]string{"MINIO_ENDPOINT": "minio:9000", "MINIO_ACCESS_KEY": "a", "MINIO_SECRET_KEY": "s", "AWS_DEFAULT_REGION": "us-east-2", "S3_FORCE_PATH_STYLE": "true"},
			want: want{host: "minio:9000", url: "https://minio:9000", secure: true, region: "us-east-2", access: "a", secret: "s", source: "MINIO_ACCESS_KEY/MINIO_SECRET_KEY", pathStyle: true, partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "endpointPrecedence", env: map[string]string{"AWS_ENDPOINT_URL_S3": "https://s3only:1", "AWS_ENDPOINT_URL": "http://generic:2", "S3_ENDPOINT": "http://s3e:3", "MINIO_ENDPOINT": "http://m:4"},
			want: want{host: "s3only:1", url: "https://s3only:1", secure: true, partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "s3EndpointBeforeMinio", env: map[string]string{"S3_ENDPOINT": "http://s3e:3", "MINIO_ENDPOINT": "http://m:4"},
			want: want{host: "s3e:3", url: "http://s3e:3", partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "configWinsOverEnv", cfg: Config{Endpoint: "http://cfg:9000", Region: "r", AccessKeyID: "ca", SecretAccessKey: "cs", PathStyle: true, PartSize: 8 << 20, Checksum: "SHA256"},
			env:  map[string]string{"AWS_ENDPOINT_URL": "http://env:1", "AWS_ACCESS_KEY_ID": "ea", "AWS_SECRET_ACCESS_KEY": "es", "AWS_REGION": "er"},
			want: want{host: "cfg:9000", url: "http://cfg:9000", region: "r", access: "ca", secret: "cs", source: "Config", pathStyle: true, partSize: 8 << 20, checksum: "sha256"}},
		{name: "awsBeforeMinio", env: map[string]string{"AWS_ACCESS_KEY_ID": "aws", "AWS_SECRET_ACCESS_KEY": "awss", "MINIO_ROOT_USER": "root", "MINIO_ROOT_PASSWORD": "rootp"},
			want: want{host: "s3.amazonaws.com", url: "https://s3.amazonaws.com", secure: true, access: "aws", secret: "awss", source: "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", partSize: DefaultPartSize, checksum: "crc64nvme"}},
		{name: "halfPairEnv", env: map[string]string{"AWS_ACCESS_KEY_ID": "only"}, err: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set"},
		{name: "halfPairConfig", cfg: Config{AccessKeyID: "only"}, err: "only one of AccessKeyID and SecretAccessKey"},
		{name: "badScheme", cfg: Config{Endpoint: "ftp://x"}, err: "scheme must be http or https"},
		{name: "endpointWithPath", cfg: Config{Endpoint: "http://x:1/bucket"}, err: "without path"},
		{name: "partSizeTooSmall", cfg: Config{PartSize: 1 << 20}, err: "PartSize"},
		{name: "unknownChecksum", cfg: Config{Checksum: "md4"}, err: "Checksum"},
		{name: "badPathStyle", env: map[string]string{"S3_FORCE_PATH_STYLE": "yes please"}, err: "S3_FORCE_PATH_STYLE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Getenv = func(k string) string { return tc.env[k] }
			s, err := cfg.resolveS3()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{s.endpointHost, s.endpointURL, s.region, s.accessKey, s.secretKey, s.sessionToken, s.credSource, s.secure, s.pathStyle, s.partSize, s.checksum}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"shards/run-1/part-0000.arrow", true},
		{"sha256/ab/" + strings.Repeat("ab", 32), true},
		{"données/ü.json", true},
		{"a/.hidden", true},
		{"a/..b", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"a/./b", false},
		{"a/../b", false},
		{"..", false},
		{"a/.", false},
		{".tmp", false},
		{"x/.tmp-123", false},
		{"a\\b", false},
		{"a\nb", false},
		{"a\x7fb", false},
		{"\xff", false},
		{strings.Repeat("k", 901), false},
	} {
		err := ValidateKey(tc.key)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, not ErrInvalidKey", tc.key, err)
		}
	}
	// Prefixes may be empty, end in a slash, or end in a partial "." segment.
	for _, p := range []string{"", "a/", "a/b", "a/.", "sha256/"} {
		if err := validatePrefix(p); err != nil {
			t.Errorf("validatePrefix(%q) = %v", p, err)
		}
	}
}

func TestKeyParseKey(t *testing.T) {
	h := SumSHA256([]byte("x"))
	k := Key(h)
	if k != "sha256/"+h[:2]+"/"+h {
		t.Fatalf("Key = %q", k)
	}
	if got, ok := ParseKey(k); !ok || got != h {
		t.Fatalf("ParseKey(%q) = %q, %v", k, got, ok)
	}
	for _, bad := range []string{"sha256/" + h, "sha256/zz/" + h, "sha256/" + h[:2] + "/" + strings.ToUpper(h), "other/" + h[:2] + "/" + h, "sha256/" + h[:2] + "/" + h[:63]} {
		if _, ok := ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestPartSizeFor(t *testing.T) {
	b := &s3Bucket{set: s3Settings{partSize: DefaultPartSize}}
	for _, tc := range []struct{ size, want int64 }{
		{-1, DefaultPartSize},
		{100 << 20, DefaultPartSize},
		{DefaultPartSize * 10000, DefaultPartSize},
		{DefaultPartSize*10000 + 1, 17 << 20},
		{1 << 40, 105 << 20},
	} {
		got := b.partSizeFor(tc.size)
		if got != tc.want || (tc.size > 0 && (tc.size+got-1)/got > 10000) || got%(1<<20) != 0 {
			t.Errorf("partSizeFor(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}
