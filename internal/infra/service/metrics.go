package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a Prometheus registry with the Go and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ServeMetrics serves reg on addr at /metrics, and health at /healthz and
// /readyz (nil: no readiness checks), until ctx is cancelled and returns
// the address it listens on (useful with port 0). The server is shut down,
// with a 5 s deadline, when ctx ends; done is closed then.
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry, health *Health, log *slog.Logger) (bound string, done <-chan struct{}, err error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	health.handle(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	ch := make(chan struct{})
	go func() { // owned by ctx: shuts the server down when ctx ends
		defer close(ch)
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-errc
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "err", err)
			}
		}
	}()
	return ln.Addr().String(), ch, nil
}
