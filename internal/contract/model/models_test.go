package model

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ServedCheckpoint reads the configured model's "root" from GET
// /v1/models (vLLM's ModelCard); a list without the model, a card
// without a root, or a server without the route gives no checkpoint.
func TestServedCheckpoint(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		want    string
		noCkpt  bool // the error wraps ErrNoCheckpoint
		wantErr string
	}{
		{name: "vLLM card", status: 200, body: `{"object":"list","data":[{"id":"planner","object":"model","owned_by":"vllm","root":"/ckpt/run7/global_step_400/actor/huggingface","parent":null,"max_model_len":32768}]}`,
			want: "/ckpt/run7/global_step_400/actor/huggingface"},
		{name: "LoRA adapter beside its base", status: 200, body: `{"object":"list","data":[{"id":"Qwen/Qwen2.5-VL-7B-Instruct","root":"Qwen/Qwen2.5-VL-7B-Instruct"},{"id":"planner","root":"/loras/step-120","parent":"Qwen/Qwen2.5-VL-7B-Instruct"}]}`,
			want: "/loras/step-120"},
		{name: "no root", status: 200, body: `{"object":"list","data":[{"id":"planner","object":"model"}]}`, noCkpt: true, wantErr: `without a "root"`},
		{name: "model not listed", status: 200, body: `{"object":"list","data":[{"id":"other","root":"/x"}]}`, noCkpt: true, wantErr: `does not list "planner"`},
		{name: "empty list", status: 200, body: `{"object":"list","data":[]}`, noCkpt: true},
		{name: "no route", status: 404, body: `{"error":"not found"}`, wantErr: "404"},
		{name: "not JSON", status: 200, body: `<html>`, wantErr: "not an OpenAI model list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := New(Config{BaseURL: srv.URL + "/v1", Model: "planner", APIKey: "k"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := c.ServedCheckpoint(ctx)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("ServedCheckpoint = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ServedCheckpoint = %q, want an error", got)
			}
			if errors.Is(err, ErrNoCheckpoint) != tc.noCkpt {
				t.Errorf("error %v: wraps ErrNoCheckpoint = %v, want %v", err, !tc.noCkpt, tc.noCkpt)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

// Models has a deadline of its own: a server that never answers does not
// hold the caller beyond ModelsTimeout (here, the caller's shorter one).
func TestModelsHasADeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(Config{BaseURL: srv.URL + "/v1", Model: "planner"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Models(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Models = %v, want a deadline error", err)
	}
}
