package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Limits of the default download.
const (
	DownloadTimeout  = 5 * time.Minute
	maxDownloadBytes = 1 << 30
)

// httpDownload GETs url on the host, within DownloadTimeout.
func httpDownload(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, DownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: HTTP %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDownloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	if len(b) > maxDownloadBytes {
		return nil, fmt.Errorf("download %s: larger than %d bytes", url, maxDownloadBytes)
	}
	return b, nil
}
