package backendkit

// Config is a backend's configuration: Validate reports, as
// *vmpool.ConfigError values joined, every value that cannot work.
type Config interface{ Validate() error }

// Prepare is the prologue of a backend's New: it gives cfg its defaults
// (withDefaults, the backend's own) and validates the result. It returns
// the result with Validate's error.
func Prepare[C Config](cfg C, withDefaults func(C) C) (C, error) {
	cfg = withDefaults(cfg)
	return cfg, cfg.Validate()
}
