package vmpool

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// SimConfig configures the "sim" backend: guest servers of codapipe's
// SIMULATOR (internal/sim), which serve the OSWorld guest protocol plus the
// simulator-only control endpoints POST /sim/reset (a simulated snapshot
// revert) and GET /sim/health. Whoever runs the simulator (rollout --sim)
// starts the guest servers and lists their URLs here.
type SimConfig struct {
	// VMs are the simulated guests.
	VMs []SimVM `yaml:"vms"`
	// Health is how a VM is checked: "sim" (GET /sim/health, default) or
	// "screenshot" (GET /screenshot, as for a real guest).
	Health string `yaml:"health"`
	// ReadyTimeout bounds the wait for a guest to answer after a reset.
	// Default 1m.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// PollInterval is the pause between readiness probes. Default 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// SimVM is one simulated guest.
type SimVM struct {
	// ID names the VM; default "sim-<index>".
	ID string `yaml:"id"`
	// URL is the guest server's base URL, "http://127.0.0.1:PORT".
	URL string `yaml:"url"`
}

// SimURLs is a SimConfig of guests at urls, with ids sim-0, sim-1, ...
func SimURLs(urls ...string) SimConfig {
	c := SimConfig{}
	for _, u := range urls {
		c.VMs = append(c.VMs, SimVM{URL: u})
	}
	return c
}

// DefaultSimTimeout is the default start and reset deadline of a pool
// file's sim pool (timeouts.start and timeouts.reset): a simulated VM
// reverts in seconds.
const DefaultSimTimeout = 2 * time.Minute

// Health check kinds of SimConfig.Health.
const (
	SimHealthSim        = "sim"
	SimHealthScreenshot = "screenshot"
)

func (c SimConfig) withDefaults() SimConfig {
	c.Health = cmp.Or(c.Health, SimHealthSim)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, 100*time.Millisecond)
	vms := make([]SimVM, len(c.VMs))
	for i, v := range c.VMs {
		v.ID = cmp.Or(v.ID, fmt.Sprintf("sim-%d", i))
		vms[i] = v
	}
	c.VMs = vms
	return c
}

// Validate reports every value of c that cannot work, as *ConfigError
// values joined; their fields start with "sim.".
func (c SimConfig) Validate() error {
	var v validator
	c.validate(&v, "sim")
	return v.err()
}

func (c SimConfig) validate(v *validator, at string) {
	if len(c.VMs) == 0 {
		v.add(at+".vms", "empty; want at least one simulated guest ({url: http://127.0.0.1:PORT})")
	}
	for i, vm := range c.VMs {
		f := fmt.Sprintf("%s.vms[%d]", at, i)
		validateVMID(v, f+".id", vm.ID)
		validateURL(v, f+".url", vm.URL)
	}
	switch c.Health {
	case "", SimHealthSim, SimHealthScreenshot:
	default:
		v.add(at+".health", "%q: want sim or screenshot", c.Health)
	}
	validatePositive(v, at+".ready_timeout", c.ReadyTimeout)
	validatePositive(v, at+".poll_interval", c.PollInterval)
}

func validateVMID(v *validator, field, id string) {
	if id != "" && !ValidID(id) {
		v.add(field, "%q: want letters, digits, '.', '_' and '-', starting with a letter or digit", id)
	}
}

func validateURL(v *validator, field, u string) {
	if u == "" {
		v.add(field, "missing; want the guest server's URL, e.g. http://10.0.0.5:5000")
		return
	}
	if _, err := guest.ParseURL(u, guest.DefaultPort); err != nil {
		v.add(field, "%v (want a URL such as http://10.0.0.5:5000)", err)
	}
}

func validatePositive(v *validator, field string, d time.Duration) {
	if d < 0 {
		v.add(field, "%v: want a positive duration", d)
	}
}

// SimBackend is the "sim" backend. Start and Reset both revert the
// simulated machine (POST /sim/reset, which takes the simulator's revert
// time) and wait until /sim/health says ok; Stop does nothing (the
// simulator's owner stops its servers).
type SimBackend struct {
	cfg    SimConfig
	specs  []VMSpec
	urls   map[string]string // id → normalized base URL
	client *http.Client
}

// NewSimBackend returns the "sim" backend of cfg.
func NewSimBackend(cfg SimConfig) (*SimBackend, error) {
	cfg = cfg.withDefaults()
	var v validator
	cfg.validate(&v, "sim")
	if err := v.err(); err != nil {
		return nil, err
	}
	b := &SimBackend{cfg: cfg, urls: map[string]string{}}
	b.client = guest.NewHTTPClient()
	for _, vm := range cfg.VMs {
		u, _ := guest.ParseURL(vm.URL, guest.DefaultPort)
		b.urls[vm.ID] = u.String()
		b.specs = append(b.specs, VMSpec{ID: vm.ID, Key: "guest:" + u.Host, Label: "simulated guest " + u.String()})
	}
	return b, nil
}

// Name is "sim".
func (b *SimBackend) Name() string { return BackendSim }

// VMs lists the simulated guests.
func (b *SimBackend) VMs(context.Context) ([]VMSpec, error) { return b.specs, nil }

// Start is Reset: a pool starts from a clean machine.
func (b *SimBackend) Start(ctx context.Context, vm VMSpec) (Endpoint, error) { return b.Reset(ctx, vm) }

// Reset reverts the simulated machine and waits until it is healthy.
func (b *SimBackend) Reset(ctx context.Context, vm VMSpec) (Endpoint, error) {
	base, ok := b.urls[vm.ID]
	if !ok {
		return Endpoint{}, fmt.Errorf("sim: no VM %q", vm.ID)
	}
	status, body, err := b.call(ctx, http.MethodPost, base+"/sim/reset")
	if err != nil {
		return Endpoint{}, fmt.Errorf("sim: POST %s/sim/reset: %w", base, err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return Endpoint{}, fmt.Errorf("sim: %s has no /sim/reset (HTTP %d): not a codapipe simulator guest; use backend: guest for real guest servers", base, status)
	}
	if status != http.StatusOK {
		return Endpoint{}, fmt.Errorf("sim: POST %s/sim/reset: HTTP %d: %s", base, status, guest.ErrorMessage(body))
	}
	// The simulator serves the app-state endpoints on the guest port.
	ep := Endpoint{GuestURL: base, StateURL: base}
	probe := func(ctx context.Context) error { return b.simHealth(ctx, base) }
	if b.cfg.Health == SimHealthScreenshot {
		if probe, err = screenshotProbe(b.client, ep); err != nil {
			return Endpoint{}, err
		}
	}
	if err := waitReady(ctx, "sim: "+base, b.cfg.ReadyTimeout, b.cfg.PollInterval, probe); err != nil {
		return Endpoint{}, err
	}
	return ep, nil
}

// Health asks GET /sim/health (or takes a screenshot, per Health).
func (b *SimBackend) Health(ctx context.Context, vm VMSpec, g *guest.Client) error {
	if b.cfg.Health == SimHealthScreenshot {
		_, err := g.Screenshot(ctx)
		return err
	}
	return b.simHealth(ctx, g.BaseURL())
}

func (b *SimBackend) simHealth(ctx context.Context, base string) error {
	status, body, err := b.call(ctx, http.MethodGet, base+"/sim/health")
	if err != nil {
		return fmt.Errorf("sim: GET %s/sim/health: %w", base, err)
	}
	var h struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &h)
	switch {
	case status == http.StatusOK && (h.Status == "ok" || h.Status == ""):
		return nil
	case status == http.StatusNotFound:
		return fmt.Errorf("sim: %s has no /sim/health (HTTP 404): not a codapipe simulator guest; use backend: guest", base)
	case h.Status != "":
		return fmt.Errorf("sim: %s is %s (HTTP %d)", base, h.Status, status)
	}
	return fmt.Errorf("sim: GET %s/sim/health: HTTP %d: %s", base, status, guest.ErrorMessage(body))
}

// call does one request; ctx bounds it.
func (b *SimBackend) call(ctx context.Context, method, url string) (int, []byte, error) {
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
func (b *SimBackend) Stop(context.Context, VMSpec) error { return nil }

// Close closes idle connections.
func (b *SimBackend) Close(context.Context) error {
	b.client.CloseIdleConnections()
	return nil
}
