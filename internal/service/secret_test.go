package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
