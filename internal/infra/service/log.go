package service

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Log formats of --log-format.
const (
	LogAuto = "auto" // text on a terminal, JSON otherwise
	LogText = "text" // one human line per record (HumanHandler)
	LogJSON = "json" // one JSON object per line, for log collectors
)

// LogConfig is how a command logs.
type LogConfig struct {
	// Service is the name the text format prints on every line
	// ("rollout"); "" prints none.
	Service string
	// Level is debug, info, warn or error ("": info).
	Level string
	// Format is auto, text or json ("": auto).
	Format string
}

// NewLogger returns a logger writing to w as c says: the human text of
// HumanHandler when the format is text, or auto and w is a terminal;
// JSON lines otherwise (for log collectors).
func NewLogger(w io.Writer, c LogConfig) (*slog.Logger, error) {
	level, err := parseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	var text bool
	switch strings.ToLower(c.Format) {
	case LogAuto, "":
		text = IsTerminal(w)
	case LogText:
		text = true
	case LogJSON:
	default:
		return nil, fmt.Errorf("log format %q: want auto, text or json", c.Format)
	}
	if text {
		return slog.New(NewHumanHandler(w, c.Service, level)), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// parseLevel parses a log level: debug, info, warn (or warning), error;
// "" is info.
func parseLevel(level string) (slog.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", level)
}

// IsTerminal reports whether w is a character device (a terminal), or
// writes to one through writers with an Unwrap method (the redacting
// writer Main wraps stdout and stderr in).
func IsTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
