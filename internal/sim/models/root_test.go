package models

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// GET /v1/models reports each endpoint's "root" the way vLLM does: the
// planner's checkpoint tag (DefaultPlannerCheckpoint unless configured),
// and the model id where no root is configured.
func TestModelsListReportsRoot(t *testing.T) {
	custom := fastConfig()
	custom.Planner.Root = "/ckpt/run7/global_step_400/actor/huggingface"
	bare := fastConfig()
	bare.Planner.Root = ""
	cases := []struct {
		name    string
		cfg     Config
		handler func(*Endpoints) http.Handler
		model   string
		root    string
	}{
		{"planner default", fastConfig(), (*Endpoints).Planner, DefaultPlannerModel, DefaultPlannerCheckpoint},
		{"planner configured", custom, (*Endpoints).Planner, DefaultPlannerModel, custom.Planner.Root},
		{"planner without a root keeps the default", bare, (*Endpoints).Planner, DefaultPlannerModel, DefaultPlannerCheckpoint},
		{"executor", fastConfig(), (*Endpoints).Executor, DefaultExecutorModel, DefaultExecutorModel},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(tc.handler(m))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/models", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var list struct {
				Object string `json:"object"`
				Data   []struct {
					ID   string `json:"id"`
					Root string `json:"root"`
				} `json:"data"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				t.Fatal(err)
			}
			if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != tc.model || list.Data[0].Root != tc.root {
				t.Fatalf("GET /v1/models = %+v; want one card %s with root %q", list, tc.model, tc.root)
			}
		})
	}
}
