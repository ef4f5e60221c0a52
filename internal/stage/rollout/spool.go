package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/nats-io/nats.go"
)

// errSpooled is wrapped by Publish's error when the trajectory could not
// be published (or recorded) and was written to the spool instead.
var errSpooled = fmt.Errorf("%w (spool)", sched.ErrKept)

// spooled is a trajectory kept on local disk because it could not be
// published: everything needed to publish it and record it in the ledger
// later (a file per trajectory, <spool>/<run token>/<id token>.json).
type spooled struct {
	Subject string        `json:"subject"`
	ID      string        `json:"id"` // the message id: the trajectory id (with the tag of a --verify re-run, msgIDFor)
	Run     string        `json:"run"`
	Task    string        `json:"task"`
	Sample  int           `json:"sample"`
	Header  nats.Header   `json:"header"`
	Body    []byte        `json:"body"`
	Record  ledger.Record `json:"record"`
	Time    time.Time     `json:"time"`
	Reason  string        `json:"reason"`
}

// decodeSpooled decodes a spool file; one without the trajectory's id or
// subject is damaged.
func decodeSpooled(body []byte) (spooled, error) {
	var s spooled
	if err := json.Unmarshal(body, &s); err != nil {
		return spooled{}, err
	}
	if s.ID == "" || s.Subject == "" {
		return spooled{}, errors.New("no trajectory id or subject")
	}
	return s, nil
}

// spoolPut writes s into dir atomically (a temporary file renamed into
// place) and returns its path.
func spoolPut(dir string, s spooled) (string, error) {
	d := filepath.Join(dir, bus.KeyToken(s.Run))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("rollout: spool: %w", err)
	}
	body, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	path := filepath.Join(d, bus.KeyToken(s.ID)+".json")
	tmp, err := os.CreateTemp(d, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("rollout: spool: %w", err)
	}
	_, err = tmp.Write(body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("rollout: spool %s: %w", path, err)
	}
	return path, nil
}

// spoolFiles lists the spooled trajectories under dir, oldest name first.
func spoolFiles(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	return paths, nil
}

// flushSpool publishes the trajectories kept in dir and records them in
// the ledger, removing each file once both are done; it returns how many
// it published and how many are left (kept for the next try). A
// trajectory's message id is its id, so one published before (the
// process stopped after the publish, before the removal) is a duplicate
// no-op on the stream.
func flushSpool(ctx context.Context, p *Publisher, dir string, log *slog.Logger) (published, left int, err error) {
	if dir == "" {
		return 0, 0, nil
	}
	paths, err := spoolFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, path := range paths {
		body, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // another process on this data directory took it
		}
		if err != nil {
			errs = append(errs, err)
			left++
			continue
		}
		s, err := decodeSpooled(body)
		if err != nil {
			log.Error("rollout: a spool file is damaged; left in place", "path", path, "err", err)
			errs = append(errs, fmt.Errorf("spool file %s: %v", path, err))
			left++
			continue
		}
		ack, err := p.publish(ctx, s.Subject, s.ID, s.Body, s.Header)
		if err == nil {
			err = p.Ledger.MarkDone(ctx, s.Run, ledger.EpisodeKey{Task: s.Task, Sample: s.Sample}, s.Record, ack.Duplicate)
		}
		if err != nil {
			log.Warn("rollout: a spooled trajectory could not be published yet; kept", "path", path, "err", err)
			errs = append(errs, err)
			left++
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		published++
		log.Info("rollout: spooled trajectory published", "path", path, "trajectory", s.ID, "run", s.Run,
			"task", s.Task, "sample", s.Sample, "duplicate", ack.Duplicate, "spooled_at", s.Time)
	}
	return published, left, errors.Join(errs...)
}

// spoolLeft counts the files in the spool directory.
func spoolLeft(dir string) int {
	if dir == "" {
		return 0
	}
	paths, _ := spoolFiles(dir)
	return len(paths)
}
