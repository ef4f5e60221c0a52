package blob

import (
	"strings"
	"testing"
)

// TestURLErrorsHideCredentials: a store URL or S3 endpoint with user
// information is refused, and the error names it without the password.
func TestURLErrorsHideCredentials(t *testing.T) {
	const pw = "pw-3f9a1c"
	errs := map[string]error{}
	_, errs["store URL"] = ParseURL("s3://user:"+pw+"@bucket/prefix", "")
	_, errs["store URL that does not parse"] = ParseURL("s3://user:"+pw+"@bucket/%zz", "")
	_, _, errs["endpoint"] = parseEndpoint("http://user:" + pw + "@127.0.0.1:9000")
	_, _, errs["endpoint that does not parse"] = parseEndpoint("http://user:" + pw + "@127.0.0.1:9000/%zz")
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}
