package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of a worker's process metrics (its /metrics).
type Sample struct {
	Time       time.Time
	Goroutines int
	OpenFDs    int
	RSS        int64 // bytes
}

// Scrape reads go_goroutines, process_open_fds and
// process_resident_memory_bytes from the Prometheus endpoint url (e.g.
// "http://127.0.0.1:9464/metrics"), within ctx's deadline.
func Scrape(ctx context.Context, client *http.Client, url string) (Sample, error) {
	s := Sample{Time: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return s, fmt.Errorf("chaos: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("chaos: scrape %s: %s", url, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		var v float64
		switch name {
		case "go_goroutines", "process_open_fds", "process_resident_memory_bytes":
			dst = &v
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return s, fmt.Errorf("chaos: scrape %s: %s: %w", url, name, err)
		}
		found++
		switch name {
		case "go_goroutines":
			s.Goroutines = int(v)
		case "process_open_fds":
			s.OpenFDs = int(v)
		default:
			s.RSS = int64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("chaos: scrape %s: %w", url, err)
	}
	if found < 3 {
		return s, fmt.Errorf("chaos: scrape %s: %d of the 3 process metrics", url, found)
	}
	return s, nil
}
