// Package fault is part of codapipe's SIMULATOR (see package sim): fault
// and latency injection on one time scale, shared by the simulated guest
// servers (package guest) and model endpoints (package models). Clock
// scales simulated time to wall time, Dist draws latencies, and Faults
// decides per call whether it hangs, fails with HTTP 500 or answers after
// a latency.
package fault

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/codapipe/codapipe/internal/infra/clock"
)

// Clock scales simulated time to wall time: a simulated duration d takes
// d×Scale of real time. Scale 1 is real time; 0.001 runs "hours" in seconds.
// Scale 0 makes every sleep return at once.
type Clock struct {
	Scale float64
}

// Real converts a simulated duration to wall time.
func (c Clock) Real(d time.Duration) time.Duration {
	if c.Scale <= 0 || d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * c.Scale)
}

// Sleep waits for the simulated duration d, or until ctx ends (then it
// returns ctx's error).
func (c Clock) Sleep(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, c.Real(d)) }

// Dist is a latency distribution in simulated time.
//
//   - Kind "fixed": always Fixed.
//   - Kind "lognormal": exp(N(ln Median, Sigma²)), heavy-tailed for Sigma ≳ 1;
//     capped at Max when Max > 0.
//   - Kind "empirical": a uniformly drawn element of Samples (e.g. measured
//     step latencies).
//
// The zero Dist is zero latency.
type Dist struct {
	Kind    string          `json:"kind"`
	Fixed   time.Duration   `json:"fixed,omitempty"`
	Median  time.Duration   `json:"median,omitempty"`
	Sigma   float64         `json:"sigma,omitempty"`
	Max     time.Duration   `json:"max,omitempty"`
	Samples []time.Duration `json:"samples,omitempty"`
}

// Fixed returns a constant distribution.
func Fixed(d time.Duration) Dist { return Dist{Kind: "fixed", Fixed: d} }

// LogNormal returns a lognormal distribution with the given median and
// shape, capped at max (0: uncapped).
func LogNormal(median time.Duration, sigma float64, max time.Duration) Dist {
	return Dist{Kind: "lognormal", Median: median, Sigma: sigma, Max: max}
}

// Validate reports a distribution that cannot be sampled.
func (d Dist) Validate() error {
	switch d.Kind {
	case "":
		return nil
	case "fixed":
		if d.Fixed < 0 {
			return fmt.Errorf("latency: fixed %v is negative", d.Fixed)
		}
	case "lognormal":
		if d.Median <= 0 || d.Sigma < 0 || math.IsNaN(d.Sigma) {
			return fmt.Errorf("latency: lognormal wants median > 0 and sigma >= 0, got %v and %v", d.Median, d.Sigma)
		}
	case "empirical":
		if len(d.Samples) == 0 {
			return fmt.Errorf("latency: empirical distribution without samples")
		}
	default:
		return fmt.Errorf("latency: unknown kind %q (want fixed, lognormal or empirical)", d.Kind)
	}
	return nil
}

// Sample draws one latency using r.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	switch d.Kind {
	case "fixed":
		return d.Fixed
	case "lognormal":
		v := time.Duration(float64(d.Median) * math.Exp(d.Sigma*r.NormFloat64()))
		if d.Max > 0 && v > d.Max {
			v = d.Max
		}
		return v
	case "empirical":
		if len(d.Samples) == 0 {
			return 0
		}
		return d.Samples[r.IntN(len(d.Samples))]
	}
	return 0
}

// Faults are per-call fault probabilities and latency of one simulated
// service (a model endpoint or a guest server).
type Faults struct {
	// Latency is each call's service time (a model endpoint answers that
	// long after the call arrived, reading and parsing it included).
	Latency Dist `json:"latency"`
	// HangProb: the call never answers (it waits until the client gives up,
	// or HangFor of simulated time when HangFor > 0).
	HangProb float64       `json:"hang_prob,omitempty"`
	HangFor  time.Duration `json:"hang_for,omitempty"`
	// ErrorProb: the call answers HTTP 500.
	ErrorProb float64 `json:"error_prob,omitempty"`
	// RateLimitProb: the call answers HTTP 429 (rate limited) with a
	// Retry-After header; model endpoints only (a guest server answers
	// 500 instead).
	RateLimitProb float64 `json:"rate_limit_prob,omitempty"`
	// MalformedProb: a model answer is malformed (model endpoints only).
	MalformedProb float64 `json:"malformed_prob,omitempty"`
}

// Validate reports probabilities outside [0,1] and bad distributions.
func (f Faults) Validate() error {
	for name, p := range map[string]float64{"hang_prob": f.HangProb, "error_prob": f.ErrorProb, "rate_limit_prob": f.RateLimitProb, "malformed_prob": f.MalformedProb} {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("faults: %s = %v, want a probability in [0,1]", name, p)
		}
	}
	return f.Latency.Validate()
}

// Outcome is what happens to one call.
type Outcome int

// Outcomes of Faults.Draw.
const (
	None      Outcome = iota // the call is served (after its latency)
	Hang                     // the call hangs (Faults.Hang)
	Error                    // the call answers HTTP 500
	RateLimit                // the call answers HTTP 429
)

// Draw decides one call's fault and latency with r (in a fixed order of
// draws, so a seeded r gives a reproducible sequence).
func (f Faults) Draw(r *rand.Rand) (Outcome, time.Duration) {
	lat := f.Latency.Sample(r)
	u := r.Float64()
	switch {
	case u < f.HangProb:
		return Hang, lat
	case u < f.HangProb+f.ErrorProb:
		return Error, lat
	case u < f.HangProb+f.ErrorProb+f.RateLimitProb:
		return RateLimit, lat
	}
	return None, lat
}

// Hang blocks as a hung call does: until ctx ends, or for HangFor of
// simulated time when set.
func (f Faults) Hang(ctx context.Context, c Clock) {
	if f.HangFor > 0 {
		_ = c.Sleep(ctx, f.HangFor)
		return
	}
	<-ctx.Done()
}
