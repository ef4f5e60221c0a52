// Package archive names the judged archive: the blob-store keys under
// which the judge keeps every judged trajectory, and the JetStream message
// ids it publishes them with. The judge writes by these names; advantage
// and sftpack read by them.
package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Prefix starts the blob-store keys of the judged archive.
const Prefix = "judged/"

// Key is where the judged trajectory id of run and app by judge version
// ver is archived: judged/<run>/<app>/<id>.<ver>.json, each part escaped
// as bus.KeyToken does (so no name can escape the prefix or split a part).
func Key(run, app, id, ver string) string {
	return Prefix + bus.KeyToken(run) + "/" + bus.KeyToken(app) + "/" + bus.KeyToken(id) + "." + bus.KeyToken(ver) + ".json"
}

// MessageID is the JetStream message id of a judged trajectory: its id and
// the judge version, so the same judgement is stored once and another
// judge version's is a distinct message.
func MessageID(id, ver string) string { return id + "." + ver }

// Name is an archive key taken apart.
type Name struct {
	Key                   string
	Run, App, ID, Version string
}

// Parse takes an archive key apart; ok is false for a key that Key does
// not make.
func Parse(key string) (Name, bool) {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return Name{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return Name{}, false
	}
	file, ok := strings.CutSuffix(parts[2], ".json")
	if !ok {
		return Name{}, false
	}
	idTok, verTok, ok := strings.Cut(file, ".")
	if !ok || strings.Contains(verTok, ".") {
		return Name{}, false
	}
	n := Name{Key: key}
	for _, p := range []struct {
		tok string
		dst *string
	}{{parts[0], &n.Run}, {parts[1], &n.App}, {idTok, &n.ID}, {verTok, &n.Version}} {
		s, ok := bus.ParseKeyToken(p.tok)
		if !ok {
			return Name{}, false
		}
		*p.dst = s
	}
	if Key(n.Run, n.App, n.ID, n.Version) != key {
		return Name{}, false
	}
	return n, true
}

// ErrDamaged reports an archived document that does not decode as a
// judged trajectory.
var ErrDamaged = errors.New("the archived document does not decode")

// Read reads the judged trajectory archived under key, with the bytes it
// was stored as. Its errors wrap blob.ErrNotFound when there is none,
// blob.ErrChecksumMismatch when the stored bytes do not match the checksum
// recorded with them, and ErrDamaged when they do not decode; any other
// error is the store's.
func Read(ctx context.Context, b blob.Bucket, key string) (*traj.Judged, []byte, error) {
	body, err := blob.ReadAll(ctx, b, key)
	if errors.Is(err, blob.ErrChecksumMismatch) && ctx.Err() == nil {
		// Read a second time, as Store.GetBytes does: bytes damaged on the
		// way (a read cut short) read right the next time, and callers
		// take a mismatch for damage in the store (blob.Damaged), which is
		// permanent.
		body, err = blob.ReadAll(ctx, b, key)
	}
	if err != nil {
		return nil, nil, err
	}
	jd, err := traj.DecodeJudged(body)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	return jd, body, nil
}

// Judged reports whether trajectory id of run and app has an archived
// judgement of any judge version.
func Judged(ctx context.Context, b blob.Bucket, run, app, id string) (bool, error) {
	prefix := Prefix + bus.KeyToken(run) + "/" + bus.KeyToken(app) + "/" + bus.KeyToken(id) + "."
	for _, err := range b.List(ctx, prefix) {
		if err != nil {
			return false, fmt.Errorf("archive: list %s: %w", prefix, err)
		}
		return true, nil
	}
	return false, nil
}
