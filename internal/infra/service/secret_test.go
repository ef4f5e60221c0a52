package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverPrinted: a Secret flag's environment value is not shown
// by --help, and whatever a command prints or fails with (its logs and
// errors) has its secrets — Secret flags, URL user information, S3
// variables, secret flags inside another command's flags — replaced by
// ***.
func TestSecretsNeverPrinted(t *testing.T) {
	const key, natsPW, s3, inArgs = "sk-env-key-81d2", "nats-pw-77aa", "s3-secret-9c9c", "sk-in-args-5150"
	t.Setenv("TEST_KEY", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3)
	var k, u, more string
	cmd := Command{
		Name: "t", Summary: "test", Common: true,
		Flags: func(f *Flags) {
			f.Secret(&k, "key", "TEST_KEY", "a key")
			f.String(&u, "url", "", "", "an endpoint")
			f.String(&more, "more-args", "", "", "another command's flags")
		},
		Run: func(ctx context.Context, env *Env) error {
			env.Log.Info("calling", "url", u, "key", k, "s3", s3)
			fmt.Fprintln(env.Stdout, "nats password", env.Common.NATS.Password)
			return errors.New("failed with " + k + " at " + u + " and " + more)
		},
	}
	for _, args := range [][]string{
		{"--help"},
		{"--url", "http://user:url-pw-1234@h/v1", "--nats-password", natsPW, "--more-args", "--planner-key " + inArgs + " --x 1"},
	} {
		var out bytes.Buffer
		MainContext(context.Background(), cmd, args, &out, &out)
		for _, secret := range []string{key, natsPW, s3, "url-pw-1234", inArgs} {
			if strings.Contains(out.String(), secret) {
				t.Errorf("%q printed the secret %q:\n%s", args, secret, out.String())
			}
		}
		if k != key {
			t.Errorf("--key from TEST_KEY = %q, want %q", k, key)
		}
	}
}

// TestSecretsMaskedPrecisely (issue 36): with the S3 access key ID
// codapipe, a bucket codapipe-prod and the data folder .codapipe, the
// bucket and the folder print intact in logs, errors and manifest URLs
// (an access key ID is an identifier, masked only as a credential's
// value), and the secret key appears nowhere.
func TestSecretsMaskedPrecisely(t *testing.T) {
	const secretKey = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
	t.Setenv("AWS_ACCESS_KEY_ID", "codapipe")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	t.Setenv("AWS_ENDPOINT_URL", "")
	cmd := Command{
		Name: "t", Common: true,
		Run: func(ctx context.Context, env *Env) error {
			env.Log.Info("store", "url", env.Common.StoreURL(), "data", env.Common.DataDir, "access_key", "codapipe")
			fmt.Fprintln(env.Stdout, "manifest s3://codapipe-prod/shards/set-1/manifest.json in", env.Common.DataDir)
			fmt.Fprintln(env.Stdout, "signed with", secretKey, "and", "Credential="+secretKey)
			return fmt.Errorf("put s3://codapipe-prod/x: signature of %q does not match", secretKey)
		},
	}
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), ".codapipe")
			var out bytes.Buffer
			MainContext(context.Background(), cmd, []string{"--data", data, "--store", "s3://codapipe-prod/blobs", "--log-format", format}, &out, &out)
			got := out.String()
			if strings.Contains(got, secretKey) || strings.Contains(got, "wJalrXUtnFEMI") {
				t.Errorf("the secret key is printed:\n%s", got)
			}
			for _, want := range []string{"s3://codapipe-prod/blobs", "s3://codapipe-prod/shards/set-1/manifest.json", "s3://codapipe-prod/x", data} {
				if !strings.Contains(got, want) {
					t.Errorf("%q is not printed intact:\n%s", want, got)
				}
			}
			if strings.Count(got, "***") < 4 {
				t.Errorf("want the secret key masked 3 times and the access key as a credential's value once:\n%s", got)
			}
		})
	}
}
