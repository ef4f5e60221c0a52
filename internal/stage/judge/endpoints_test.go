package judge

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// TestEndpointNames: a judge endpoint is recorded by its URL without the
// credentials; an ensemble whose endpoints differ only in their
// credentials is refused (judgements could not tell them apart), and the
// refusal shows no password; a spec error shows no password either.
func TestEndpointNames(t *testing.T) {
	a, err := ParseEndpoint("http://u:pw-one@judge:8000/v1=Qwen")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Name(), "http://***@judge:8000/v1"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	b, _ := ParseEndpoint("http://u:pw-two@judge:8000/v1=Qwen")
	c, _ := ParseEndpoint("http://judge-b:8000/v1=Qwen")
	store, err := blob.Open(t.Context(), t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		eps  []EndpointSpec
		ok   bool
	}{
		{"distinct endpoints", []EndpointSpec{a, c}, true},
		{"the same endpoint twice", []EndpointSpec{a, a}, true},
		{"differ only in credentials", []EndpointSpec{a, b}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Endpoints: tc.eps, Policy: CODAPolicy(), Store: store})
			if (err == nil) != tc.ok {
				t.Fatalf("New: %v, want ok %v", err, tc.ok)
			}
			if err != nil && (strings.Contains(err.Error(), "pw-one") || strings.Contains(err.Error(), "pw-two")) {
				t.Errorf("the refusal shows a password: %v", err)
			}
		})
	}
	if _, err := ParseEndpoint("ftp://u:pw-three@judge/v1=Qwen"); err == nil || strings.Contains(err.Error(), "pw-three") {
		t.Errorf("ParseEndpoint of a bad URL: %v; want an error without the password", err)
	}
}

// TestParseEndpointBlankModelHidesPassword: the error of a --judge with
// no model does not show the URL's password.
func TestParseEndpointBlankModelHidesPassword(t *testing.T) {
	_, err := ParseEndpoint("http://u:s3cretpw@judge:8000/v1= ")
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("ParseEndpoint: %v, want an error without the password", err)
	}
}
