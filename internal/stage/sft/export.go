package sft

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/export"
	"github.com/codapipe/codapipe/internal/infra/redact"
)

// ExportDir uploads the dataset folder dir (its manifest.json lists the
// files) to the bucket at dstURL (s3://bucket/prefix, or a folder) with
// internal/infra/export: the files the bucket lacks or holds with another
// SHA-256, then manifest.json last. A re-run after an interruption sends
// only what is missing. Progress goes to progressW (a bar on a terminal,
// log lines otherwise).
func ExportDir(ctx context.Context, dir, dstURL string, log *slog.Logger, progressW io.Writer) error {
	log = logger(log)
	shown := redact.URL(dstURL) // for messages: never the credentials
	dst, err := blob.OpenBucket(ctx, dstURL, export.BucketConfig(blob.Config{Logger: log}))
	if err != nil {
		return err
	}
	prog := newProgress(progressW, log)
	started := false
	st, err := export.Dir(ctx, dir, dst, "", export.Options{
		Progress: func(p export.Progress) {
			if !started {
				prog.begin("exporting to "+shown, "files", p.Files)
				started = true
			}
			prog.set(p.FilesDone, p.Bytes, p.BytesToUpload)
		},
	})
	if started {
		prog.end()
	}
	if err != nil {
		// Not "exported": the set is not there whole (its manifest goes last).
		log.Error("sftpack: export failed", "to", shown, "files", st.Files, "uploaded", st.Uploaded, "skipped", st.Skipped,
			"bytes", st.Bytes, "elapsed", st.Elapsed.String(), "err", err)
		return fmt.Errorf("%w (%d of %d files uploaded before it stopped)", err, st.Uploaded, st.Files)
	}
	log.Info("sftpack: exported", "to", shown, "files", st.Files, "uploaded", st.Uploaded, "skipped", st.Skipped,
		"bytes", st.Bytes, "manifest_uploaded", st.ManifestUploaded, "elapsed", st.Elapsed.String())
	return nil
}
