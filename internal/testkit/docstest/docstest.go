// Package docstest is for the tests that hold the documentation to the
// commands: it reads the marked tables of docs/operations.md, checks the
// flag tables against the commands' flags (CheckFlags) and compares the
// documented metrics with a live Prometheus scrape.
package docstest

import (
	"bufio"
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/prometheus/client_golang/prometheus"
)

// Tables reads the tables of the Markdown file at path that follow a
// "<!-- NAME -->" marker: marker → rows, each row's cells trimmed (the
// header row and the separator row left out).
func Tables(t testing.TB, path string) map[string][][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][][]string{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "<!-- ") && strings.HasSuffix(line, " -->"):
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- "), " -->")
			out[cur] = nil
		case cur != "" && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if strings.HasPrefix(cells[0], "---") {
				if len(out[cur]) == 1 {
					out[cur] = out[cur][:0] // the row above was the header
				}
				continue
			}
			out[cur] = append(out[cur], cells)
		case cur != "" && line != "" && len(out[cur]) > 0:
			cur = "" // the table ended
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Unquote strips the backquotes of a table cell.
func Unquote(s string) string { return strings.Trim(s, "`") }

// CheckFlags checks that the union of the named tables (markers such as
// "flags: common") lists exactly cmd's flags, each with the environment
// variable and default --help shows ("—" for none): it reports a flag the
// tables lack, a row for a flag cmd does not have, a differing variable
// or default, and a named table that is missing or empty.
func CheckFlags(t testing.TB, tables map[string][][]string, cmd service.Command, names ...string) {
	t.Helper()
	type row struct{ env, def string }
	doc := map[string]row{}
	for _, name := range names {
		rows, ok := tables[name]
		if !ok || len(rows) == 0 {
			t.Errorf("no table after <!-- %s -->", name)
			continue
		}
		for _, r := range rows {
			if len(r) < 3 {
				t.Errorf("%s: short row %q", name, r)
				continue
			}
			doc[Unquote(r[0])] = row{env: Unquote(r[1]), def: Unquote(r[2])}
		}
	}
	seen := map[string]bool{}
	cmd.FlagSet().VisitAll(func(f *flag.Flag) {
		name := "--" + f.Name
		seen[name] = true
		d, ok := doc[name]
		if !ok {
			t.Errorf("%s: %s is not in the docs' tables %q", cmd.Name, name, names)
			return
		}
		env, def := service.EnvOf(f.Usage), f.DefValue
		if env == "" {
			env = "—"
		}
		if def == "" {
			def = "—"
		}
		if d.env != env || d.def != def {
			t.Errorf("%s: %s: docs say env %q, default %q; --help says %q, %q", cmd.Name, name, d.env, d.def, env, def)
		}
	})
	for name := range doc {
		if !seen[name] {
			t.Errorf("the docs list %s, which %s does not have", name, cmd.Name)
		}
	}
}

// Metrics reads the "<!-- metrics -->" table of path: metric → the
// services that serve it.
func Metrics(t testing.TB, path string) map[string][]string {
	t.Helper()
	docs := map[string][]string{}
	for _, r := range Tables(t, path)["metrics"] {
		if len(r) < 4 {
			t.Fatalf("short metrics row %q", r)
		}
		docs[Unquote(r[0])] = strings.Split(strings.ReplaceAll(r[3], " ", ""), ",")
	}
	if len(docs) == 0 {
		t.Fatalf("%s has no metrics table", path)
	}
	return docs
}

// ServeMetrics serves reg on a loopback port for the rest of the test (the
// server is stopped and waited for at cleanup) and returns its /metrics
// URL.
func ServeMetrics(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := service.ServeMetrics(ctx, "127.0.0.1:0", reg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + addr + "/metrics"
}

// Scrape returns the names of the metrics served at url (its "# TYPE"
// lines).
func Scrape(t testing.TB, ctx context.Context, url string) map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scraped := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			scraped[f[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return scraped
}

// CheckMetrics reports every metric documented for service that the
// scrape lacks, every codapipe_* metric of the scrape the docs lack, and
// a scrape without the Go and process collectors.
func CheckMetrics(t testing.TB, docs map[string][]string, scraped map[string]bool, service string) {
	t.Helper()
	for name, services := range docs {
		if slices.Contains(services, service) && !scraped[name] {
			t.Errorf("%s is documented for %s but not in the scrape", name, service)
		}
	}
	for name := range scraped {
		if strings.HasPrefix(name, "codapipe_") && docs[name] == nil {
			t.Errorf("%s is in the scrape but not documented in docs/operations.md", name)
		}
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !scraped[want] {
			t.Errorf("%s missing: the Go and process collectors are not registered", want)
		}
	}
}
