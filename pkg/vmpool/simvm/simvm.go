// Package simvm is the "sim" backend of package vmpool: the simulated VMs
// of codapipe's simulator (internal/sim). Each has a guest server, which
// serves the OSWorld/ScienceBoard guest protocol plus the simulator-only
// control endpoints POST /sim/reset (a simulated snapshot revert) and GET
// /sim/health, and an app server on a port of its own (a real VM's port
// 8000), which GET /sim/health reports as "app_url".
package simvm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/backendkit"
)

// Name is the backend's name, as a pool file's "backend:" spells it.
const Name = "sim"

// Config configures the "sim" backend. Whoever runs the simulator (rollout
// --sim) starts the guest servers and lists their URLs here.
type Config struct {
	// VMs are the simulated guests.
	VMs []VM `yaml:"vms"`
	// Health is how a VM is checked: "sim" (GET /sim/health, default) or
	// "screenshot" (GET /screenshot, as for a real guest).
	Health string `yaml:"health"`
	// ReadyTimeout bounds the wait for a guest to answer after a reset.
	// Default 1m.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// PollInterval is the pause between readiness probes. Default 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// VM is one simulated guest.
type VM struct {
	// ID names the VM; default "sim-<index>".
	ID string `yaml:"id"`
	// URL is the guest server's base URL, "http://127.0.0.1:PORT".
	URL string `yaml:"url"`
	// StateURL is the app server's base URL (the lease's
	// Endpoint.StateURL). Default: the one the guest's GET /sim/health
	// reports (app_url).
	StateURL string `yaml:"state_url"`
}

// URLs is a Config of guests at urls, with ids sim-0, sim-1, ...
func URLs(urls ...string) Config {
	c := Config{}
	for _, u := range urls {
		c.VMs = append(c.VMs, VM{URL: u})
	}
	return c
}

// DefaultTimeout is the default start and reset deadline of a pool file's
// sim pool (timeouts.start and timeouts.reset): a simulated VM reverts in
// seconds.
const DefaultTimeout = 2 * time.Minute

// Health check kinds of Config.Health.
const (
	HealthSim        = "sim"
	HealthScreenshot = "screenshot"
)

func (c Config) withDefaults() Config {
	c.Health = cmp.Or(c.Health, HealthSim)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, 100*time.Millisecond)
	c.VMs = backendkit.NameVMs(c.VMs, "sim", func(vm *VM) *string { return &vm.ID })
	return c
}

// Validate reports every value of c that cannot work, as
// *vmpool.ConfigError values joined; their fields start with "sim.".
func (c Config) Validate() error {
	var v backendkit.Validator
	v.NonEmpty("sim.vms", len(c.VMs), "simulated guest ({url: http://127.0.0.1:PORT})")
	for i, vm := range c.VMs {
		v.GuestVM(fmt.Sprintf("sim.vms[%d]", i), vm.ID, vm.URL, vm.StateURL)
	}
	switch c.Health {
	case "", HealthSim, HealthScreenshot:
	default:
		v.Add("sim.health", "%q: want sim or screenshot", c.Health)
	}
	v.Positive("sim.ready_timeout", c.ReadyTimeout)
	v.Positive("sim.poll_interval", c.PollInterval)
	return v.Err()
}

// Backend is the "sim" backend. Start and Reset both revert the
// simulated machine (POST /sim/reset, which takes the simulator's revert
// time) and wait until /sim/health says ok; Stop does nothing (the
// simulator's owner stops its servers).
type Backend struct {
	cfg    Config
	specs  []vmpool.VMSpec
	eps    map[string]vmpool.Endpoint // id → normalized URLs; StateURL the configured one, if any
	client *http.Client
}

// New returns the "sim" backend of cfg.
func New(cfg Config) (*Backend, error) {
	cfg, err := backendkit.Prepare(cfg, Config.withDefaults)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, eps: map[string]vmpool.Endpoint{}, client: guest.NewHTTPClient()}
	for _, vm := range cfg.VMs {
		ep, key := backendkit.GuestAddrs(vm.URL, vm.StateURL)
		b.eps[vm.ID] = ep
		b.specs = append(b.specs, vmpool.VMSpec{ID: vm.ID, Key: key, Label: "simulated guest " + ep.GuestURL})
	}
	return b, nil
}

// Name is "sim".
func (b *Backend) Name() string { return Name }

// VMs lists the simulated guests.
func (b *Backend) VMs(context.Context) ([]vmpool.VMSpec, error) { return b.specs, nil }

// Reset reverts the simulated machine and waits until it is healthy.
func (b *Backend) Reset(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	ep, ok := b.eps[vm.ID]
	if !ok {
		return vmpool.Endpoint{}, fmt.Errorf("sim: no VM %q", vm.ID)
	}
	base := ep.GuestURL
	status, body, err := b.call(ctx, http.MethodPost, base+"/sim/reset")
	if err != nil {
		return vmpool.Endpoint{}, fmt.Errorf("sim: POST %s/sim/reset: %w", base, err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return vmpool.Endpoint{}, fmt.Errorf("sim: %s has no /sim/reset (HTTP %d): not a codapipe simulator guest; use backend: guest for real guest servers", base, status)
	}
	if status != http.StatusOK {
		return vmpool.Endpoint{}, fmt.Errorf("sim: POST %s/sim/reset: HTTP %d: %s", base, status, guest.ErrorMessage(body))
	}
	probe := func(ctx context.Context) error {
		appURL, err := b.simHealth(ctx, base)
		if err == nil && ep.StateURL == "" {
			ep.StateURL = appURL
		}
		return err
	}
	if b.cfg.Health == HealthScreenshot {
		if probe, err = backendkit.ScreenshotProbe(b.client, ep); err != nil {
			return vmpool.Endpoint{}, err
		}
	}
	if err := backendkit.WaitReady(ctx, "sim: "+base, b.cfg.ReadyTimeout, b.cfg.PollInterval, probe); err != nil {
		return vmpool.Endpoint{}, err
	}
	if ep.StateURL == "" && b.cfg.Health == HealthScreenshot {
		appURL, err := b.simHealth(ctx, base)
		if err != nil {
			return vmpool.Endpoint{}, err
		}
		ep.StateURL = appURL
	}
	if ep.StateURL == "" {
		return vmpool.Endpoint{}, fmt.Errorf("sim: %s reports no app server (app_url in GET /sim/health); give the VM's state_url", base)
	}
	return ep, nil
}

// DefaultAfterRevert is ScienceBoard's reset command
// (guestproto.ResetCommand): the simulated VMs are ScienceBoard VMs, whose
// harness runs it after every revert (the simulated shell runs the
// simulated script, which exits 0).
func (b *Backend) DefaultAfterRevert() string { return guestproto.ResetCommand }

// Start is Reset: a pool starts from a clean machine.
func (b *Backend) Start(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.Reset(ctx, vm)
}

// Health asks GET /sim/health (or takes a screenshot, per Health).
func (b *Backend) Health(ctx context.Context, vm vmpool.VMSpec, g *guest.Client) error {
	if b.cfg.Health == HealthScreenshot {
		return backendkit.ScreenshotHealth(ctx, g)
	}
	_, err := b.simHealth(ctx, g.BaseURL())
	return err
}

// simHealth asks GET /sim/health; it returns the app server's URL the
// guest reports (app_url, "" when none) when the VM is healthy.
func (b *Backend) simHealth(ctx context.Context, base string) (string, error) {
	status, body, err := b.call(ctx, http.MethodGet, base+"/sim/health")
	if err != nil {
		return "", fmt.Errorf("sim: GET %s/sim/health: %w", base, err)
	}
	var h struct {
		Status string `json:"status"`
		AppURL string `json:"app_url"`
	}
	_ = json.Unmarshal(body, &h)
	switch {
	case status == http.StatusOK && (h.Status == "ok" || h.Status == ""):
		return h.AppURL, nil
	case status == http.StatusNotFound:
		return "", fmt.Errorf("sim: %s has no /sim/health (HTTP 404): not a codapipe simulator guest; use backend: guest", base)
	case h.Status != "":
		return "", fmt.Errorf("sim: %s is %s (HTTP %d)", base, h.Status, status)
	}
	return "", fmt.Errorf("sim: GET %s/sim/health: HTTP %d: %s", base, status, guest.ErrorMessage(body))
}

// call does one request; ctx bounds it.
func (b *Backend) call(ctx context.Context, method, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err // a *url.Error; it matches ctx's error when ctx ended
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// Stop does nothing: the simulator's owner stops its servers.
func (b *Backend) Stop(context.Context, vmpool.VMSpec) error { return nil }

// Close closes idle connections.
func (b *Backend) Close(context.Context) error {
	b.client.CloseIdleConnections()
	return nil
}
