package model_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestURLCredentials: user:password@ in the base URL is sent as basic
// authentication (in place of the API key) on chat calls and model lists,
// the Client's Config names the endpoint without it, and an error of an
// endpoint that refuses the call shows neither the password, nor the
// key, nor their basic-auth encoding.
func TestURLCredentials(t *testing.T) {
	const user, pw, key = "alice", "s3cr3t-pw", "sk-not-this-one"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		// An endpoint that echoes what it was sent in its error.
		http.Error(w, "refused "+r.Header.Get("Authorization")+" on "+r.URL.String(), http.StatusForbidden)
	}))
	defer srv.Close()
	raw := strings.Replace(srv.URL, "http://", "http://"+user+":"+pw+"@", 1) + "/v1"
	m, err := model.New(model.Config{BaseURL: raw, Model: "m", APIKey: key, Attempts: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(srv.URL, "http://", "http://***@", 1) + "/v1"; m.Config().BaseURL != want {
		t.Errorf("Config().BaseURL = %q, want %q", m.Config().BaseURL, want)
	}
	_, chatErr := m.Chat(context.Background(), model.Request{Encoded: []byte(`[{"role":"user","content":"hi"}]`), N: 1,
		Params: model.Params{Sampling: traj.Sampling{TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 16}}})
	_, listErr := m.Models(context.Background())
	for _, err := range []error{chatErr, listErr} {
		if err == nil {
			t.Fatal("a refused call: no error")
		}
		for _, secret := range []string{pw, key, basic} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows a secret %q: %v", secret, err)
			}
		}
	}
	if len(got) != 2 || got[0] != "Basic "+basic || got[1] != "Basic "+basic {
		t.Errorf("Authorization headers %q, want basic authentication of %s twice", got, user)
	}
}

// TestURLQueryAndBadURLs (issue 40): a base URL with a query (?api_key=K,
// as some gateways take the key) sends it on every route after the
// route's path, not inside it, and no error shows the key; a base URL
// whose password holds an unencoded '#' or '/' is refused by New without
// echoing any of it.
func TestURLQueryAndBadURLs(t *testing.T) {
	const key = "k3y-in-the-query"
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		http.Error(w, "refused "+r.URL.String(), http.StatusForbidden)
	}))
	defer srv.Close()
	m, err := model.New(model.Config{BaseURL: srv.URL + "/v1/?api_key=" + key, Model: "m", Attempts: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, chatErr := m.Chat(context.Background(), model.Request{Encoded: []byte(`[{"role":"user","content":"hi"}]`), N: 1,
		Params: model.Params{Sampling: traj.Sampling{TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 16}}})
	_, listErr := m.Models(context.Background())
	want := []string{"/v1/chat/completions?api_key=" + key, "/v1/models?api_key=" + key}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("requests %q, want %q", paths, want)
	}
	for _, err := range []error{chatErr, listErr} {
		if err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("error %v: want one, without the key", err)
		}
	}
	if strings.Contains(m.Config().BaseURL, key) {
		t.Errorf("Config().BaseURL %q shows the key", m.Config().BaseURL)
	}
	for _, raw := range []string{"http://u:ab#SECRET@127.0.0.1:1/v1", "http://u:ab/SECRET@127.0.0.1:1/v1", "http://u:ab?SECRET@h/v1", "ftp://h/v1", "http:///v1"} {
		_, err := model.New(model.Config{BaseURL: raw, Model: "m"}, nil)
		if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "ab") && strings.Contains(raw, "ab") {
			t.Errorf("New(%q): %v; want an error without the URL's credentials", raw, err)
		}
	}
}

// TestAnswerTooLarge (issue 40, "images that explode": an 8 MiB answer):
// an answer longer than MaxAnswerBytes fails the call at once, unretried,
// with an error that names the limit and the flag that raises it.
func TestAnswerTooLarge(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"`+strings.Repeat("x", 2<<20)+`"}}]}`)
	}))
	defer srv.Close()
	m, err := model.New(model.Config{BaseURL: srv.URL + "/v1", Model: "m", Attempts: 4, Backoff: time.Millisecond,
		MaxAnswerBytes: 1 << 20, MaxAnswerFlag: "--max-answer-bytes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Chat(context.Background(), model.Request{Encoded: []byte(`[{"role":"user","content":"hi"}]`), N: 1,
		Params: model.Params{Sampling: traj.Sampling{TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 16}}})
	var big *model.AnswerTooLargeError
	if !errors.As(err, &big) || big.Limit != 1<<20 || !strings.Contains(err.Error(), "--max-answer-bytes raises it") {
		t.Fatalf("Chat: %v, want an AnswerTooLargeError naming the limit and the flag", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d requests, want 1: a too-long answer is not retried", n)
	}
	m2, _ := model.New(model.Config{BaseURL: srv.URL + "/v1", Model: "m", Attempts: 1, MaxAnswerBytes: 4 << 20}, nil)
	if _, err := m2.Chat(context.Background(), model.Request{Encoded: []byte(`[{"role":"user","content":"hi"}]`), N: 1,
		Params: model.Params{Sampling: traj.Sampling{TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 16}}}); err != nil {
		t.Errorf("a 2 MiB answer under a 4 MiB limit: %v", err)
	}
}
