package judge

import (
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// FuzzURLSecrets (issue 40): the URL-bearing inputs of the commands —
// model endpoints (--planner-url, --executor-url), --judge, --nats, the
// blob store's URL, a pool's guest URLs and a task's download URL — given
// a password or a query secret that holds anything, written unencoded as
// a careless operator would. Whatever each parser does with it (refuse,
// or accept), neither the password nor the secret query value shows in
// its error or in what it keeps to print or record.
func FuzzURLSecrets(f *testing.F) {
	for _, s := range []string{"", "ab", "ab#x", "ab/x", "ab?x", "a@b", "a@b/c", "x@h/y", "8000/x", "a b", "%zz", "[::1]", "a:b:c", "@", "#@", "/@h:1/", "a,b", ":4222/x"} {
		f.Add(s, uint8(0))
	}
	const marker = "SEKRET9" // ends every secret: what must not show
	f.Fuzz(func(t *testing.T, p string, form uint8) {
		pw := marker + p + marker // at both ends: a part of it shows too
		raws := map[string]string{
			"user:password": "http://u:" + pw + "@h.example:8000/v1",
			"token":         "http://" + pw + "@h.example:8000/v1",
			"query":         "http://h.example:8000/v1?api_key=" + url.QueryEscape(pw) + "&model=m",
		}
		scheme := []string{"https", "nats", "s3", "tls"}[int(form)%4]
		check := func(what, out string) {
			if strings.Contains(out, marker) {
				t.Fatalf("%s shows the secret: %q", what, out)
			}
		}
		for form, raw := range raws {
			if u, err := redact.ParseURL("--x", raw); err != nil {
				check(form+": ParseURL's error", err.Error())
			} else {
				check(form+": Shown", redact.Shown(u))
			}
			if _, err := model.CheckBaseURL("--planner-url", raw); err != nil {
				check(form+": CheckBaseURL's error", err.Error())
			}
			if m, err := model.New(model.Config{BaseURL: raw, Model: "m"}, nil); err != nil {
				check(form+": model.New's error", err.Error())
			} else {
				check(form+": the model's recorded endpoint", m.Config().BaseURL)
			}
			if spec, err := ParseEndpoint(raw + "=m"); err != nil {
				check(form+": --judge's error", err.Error())
			} else {
				check(form+": the judge endpoint's name", spec.Name())
			}
			if _, err := guest.ParseURL(raw, 5000); err != nil {
				check(form+": a guest URL's error", err.Error())
			}
			other := strings.Replace(raw, "http://", scheme+"://", 1)
			if err := bus.CheckURL(other); err != nil {
				check(form+": --nats's error", err.Error())
			}
			if err := bus.CheckURL("nats://127.0.0.1:4222," + other); err != nil {
				check(form+": --nats list's error", err.Error())
			}
			if bare, ok := strings.CutPrefix(raw, "http://"); ok { // a NATS seed without a scheme
				if err := bus.CheckURL(bare); err != nil {
					check(form+": a scheme-less --nats's error", err.Error())
				}
			}
			if loc, err := blob.ParseURL(other, ""); err != nil {
				check(form+": the store URL's error", err.Error())
			} else {
				check(form+": the store location", loc.String())
			}
		}
	})
}
