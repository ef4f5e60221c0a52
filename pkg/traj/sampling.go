package traj

import (
	"fmt"
	"math"
)

// Sampling are the decoding parameters of requests to one model. Every
// field is sent explicitly with every request, so a server's generation
// defaults (vLLM fills what a request leaves out from the model's
// generation_config.json) never decide them. The names and meanings are
// vLLM's sampling parameters.
type Sampling struct {
	Temperature float64 `json:"temperature"` // 0 is greedy
	TopP        float64 `json:"top_p"`       // (0,1]; 1 disables
	// TopK keeps the K most likely tokens; -1 (or 0) disables it. A top_k
	// of 1 is greedy whatever the temperature.
	TopK              int     `json:"top_k"`
	MinP              float64 `json:"min_p"`              // [0,1]; 0 disables
	RepetitionPenalty float64 `json:"repetition_penalty"` // > 0; 1 disables
	PresencePenalty   float64 `json:"presence_penalty"`   // [-2,2]; 0 disables
	FrequencyPenalty  float64 `json:"frequency_penalty"`  // [-2,2]; 0 disables
	MaxTokens         int     `json:"max_tokens"`         // > 0
	// Seed makes sampling reproducible on servers that honour it; nil is
	// unseeded.
	Seed *int64   `json:"seed"`
	Stop []string `json:"stop"` // stop strings; empty for none
}

// Greedy reports whether the parameters leave the model no choice: a
// temperature of 0 or a top_k of 1.
func (s Sampling) Greedy() bool { return s.Temperature == 0 || s.TopK == 1 }

// Check reports the first parameter outside its range.
func (s Sampling) Check() error {
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("sampling: %s = %v, want %s", name, v, want)
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !finite(s.Temperature) || s.Temperature < 0:
		return bad("temperature", s.Temperature, ">= 0")
	case !finite(s.TopP) || s.TopP <= 0 || s.TopP > 1:
		return bad("top_p", s.TopP, "in (0,1]")
	case s.TopK < -1:
		return bad("top_k", s.TopK, "-1 (disabled), 0 (disabled) or a positive count")
	case !finite(s.MinP) || s.MinP < 0 || s.MinP > 1:
		return bad("min_p", s.MinP, "in [0,1]")
	case !finite(s.RepetitionPenalty) || s.RepetitionPenalty <= 0:
		return bad("repetition_penalty", s.RepetitionPenalty, "> 0 (1 disables)")
	case !finite(s.PresencePenalty) || s.PresencePenalty < -2 || s.PresencePenalty > 2:
		return bad("presence_penalty", s.PresencePenalty, "in [-2,2]")
	case !finite(s.FrequencyPenalty) || s.FrequencyPenalty < -2 || s.FrequencyPenalty > 2:
		return bad("frequency_penalty", s.FrequencyPenalty, "in [-2,2]")
	case s.MaxTokens <= 0:
		return bad("max_tokens", s.MaxTokens, "> 0")
	}
	for i, st := range s.Stop {
		if st == "" {
			return bad(fmt.Sprintf("stop[%d]", i), `""`, "a non-empty string")
		}
	}
	return nil
}
