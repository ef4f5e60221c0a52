package natstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/internal/testkit/toolbin"
)

// EnvBinary names the environment variable that overrides the nats-server binary's path.
const EnvBinary = "CODAPIPE_NATS_SERVER"

// ClusterName is the name of the clusters StartCluster starts.
const ClusterName = "natstest"

// clusterReadyTimeout bounds StartCluster's wait for a healthy cluster with a meta leader.
const clusterReadyTimeout = 60 * time.Second

// stopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopTimeout = 15 * time.Second

// Cluster is a JetStream cluster of separate nats-server processes owned by one test, started
// by StartCluster. Node i is named "n<i>" and keeps its ports (client, cluster route, monitoring
// HTTP) and its file store across Kill/Stop and Restart. Its methods may be called from any
// goroutine; failures are reported with t.Errorf.
type Cluster struct {
	t     testing.TB
	bin   string
	nodes []*node
	http  *http.Client
}

// node is one nats-server process of a cluster.
type node struct {
	name                   string
	client, route, monitor string // "127.0.0.1:<port>"
	conf                   string // path of its configuration file
	log                    *syncio.Buffer
	mu                     sync.Mutex
	proc                   *servertest.Process // nil until started
	starts                 int
}

// ClusterBinary returns the path of the nats-server binary: $CODAPIPE_NATS_SERVER, or
// .bin/nats-server in the repository root found by walking up from the working directory to
// go.mod (built by `make tools`). The error says how to get it.
func ClusterBinary() (string, error) { return toolbin.Find(EnvBinary, binName) }

// binName is the binary's name in .bin/.
const binName = "nats-server"

// StartCluster starts a JetStream cluster of n separate nats-server processes on loopback
// (random client, route and monitoring ports; file stores in t.TempDir(); server names n0..n<n-1>;
// cluster name ClusterName), waits until every node is healthy and a meta leader is elected,
// and registers a cleanup that kills every process and prints the nodes' logs when the test
// failed. When the binary is missing (see ClusterBinary) it skips the test, or fails it when
// CI=true.
func StartCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	var o clusterOpts
	for _, f := range opts {
		f(&o)
	}
	if n < 1 {
		t.Fatalf("natstest: StartCluster(%d): need at least one node", n)
	}
	bin := servertest.Binary(t, EnvBinary, binName, "nats-server")
	for attempt := 1; ; attempt++ {
		c, err := launchCluster(t, bin, n, o)
		if err == nil {
			return c
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatalf("natstest: start a %d-node cluster: %v", n, err)
		}
	}
}

var errPortTaken = errors.New("port already in use")

// ClusterOption changes how StartCluster starts a cluster.
type ClusterOption func(*clusterOpts)

type clusterOpts struct {
	dir string
}

// StoreIn puts the nodes' configurations and file stores in a new folder
// under dir (removed at the end) instead of t.TempDir(): a benchmark puts
// them in a memory file system (/dev/shm) to measure the workers rather
// than the disk's fsyncs.
func StoreIn(dir string) ClusterOption { return func(o *clusterOpts) { o.dir = dir } }

// launchCluster writes the nodes' configurations, starts them and waits for the cluster. It
// returns errPortTaken when a chosen port was taken in the meantime, so that StartCluster can
// retry with fresh ports.
func launchCluster(t testing.TB, bin string, n int, o clusterOpts) (*Cluster, error) {
	t.Helper()
	c := &Cluster{t: t, bin: bin, http: &http.Client{Timeout: 2 * time.Second}}
	addrs, err := servertest.FreeAddrs(3 * n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		nd := &node{name: fmt.Sprintf("n%d", i), log: &syncio.Buffer{}}
		nd.client, nd.route, nd.monitor = addrs[3*i], addrs[3*i+1], addrs[3*i+2]
		c.nodes = append(c.nodes, nd)
	}
	base := t.TempDir()
	if o.dir != "" {
		var err error
		if base, err = os.MkdirTemp(o.dir, "natstest-"); err != nil {
			return nil, err
		}
		t.Cleanup(func() { os.RemoveAll(base) }) // registered first: runs after the processes are killed
	}
	for _, nd := range c.nodes {
		dir := filepath.Join(base, nd.name)
		if err := os.MkdirAll(filepath.Join(dir, "jetstream"), 0o700); err != nil {
			return nil, err
		}
		nd.conf = filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(nd.conf, c.config(nd, filepath.Join(dir, "jetstream")), 0o600); err != nil {
			return nil, err
		}
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.signal(i, syscall.SIGKILL, 0)
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("natstest: log of cluster node %s (client %s, monitor %s):\n%s", nd.name, nd.client, nd.monitor, nd.log.Tail(32<<10))
			}
		}
	})
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		for i, nd := range c.nodes {
			c.signal(i, syscall.SIGKILL, 0)
			if strings.Contains(nd.log.String(), "address already in use") {
				return nil, fmt.Errorf("%w: node %s: %v", errPortTaken, nd.name, err)
			}
		}
		return nil, err
	}
	return c, nil
}

// config is the nats-server configuration of one node: its ports, its store and routes to
// every node of the cluster.
func (c *Cluster) config(nd *node, store string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "server_name: %q\nlisten: %q\nhttp: %q\n", nd.name, nd.client, nd.monitor)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n}\n", store)
	fmt.Fprintf(&b, "cluster {\n  name: %q\n  listen: %q\n  routes: [\n", ClusterName, nd.route)
	for _, other := range c.nodes {
		if other != nd {
			fmt.Fprintf(&b, "    %q\n", "nats-route://"+other.route)
		}
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// start launches node i's process (which must not be running).
func (c *Cluster) start(i int) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.running() {
		return fmt.Errorf("node %s is already running", nd.name)
	}
	nd.starts++
	if nd.starts > 1 {
		fmt.Fprintf(nd.log, "=== natstest: restart %d of %s\n", nd.starts-1, nd.name)
	}
	cmd := exec.Command(c.bin, "-c", nd.conf)
	cmd.Stdout = nd.log
	cmd.Stderr = nd.log
	proc, err := servertest.Start(cmd)
	if err != nil {
		return fmt.Errorf("start node %s: %w", nd.name, err)
	}
	nd.proc = proc
	return nil
}

// running reports whether the node's process is alive; nd.mu must be held.
func (nd *node) running() bool { return nd.proc != nil && nd.proc.Running() }

// signal sends sig to node i's process group and waits for it to exit; after grace (when > 0)
// it sends SIGKILL. A node that is not running is left alone.
func (c *Cluster) signal(i int, sig syscall.Signal, grace time.Duration) {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc != nil {
		nd.proc.Signal(sig, grace)
	}
}

func (c *Cluster) check(i int) bool {
	if i < 0 || i >= len(c.nodes) {
		c.t.Errorf("natstest: node %d of a %d-node cluster", i, len(c.nodes))
		return false
	}
	return true
}

// N is the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// Name is node i's server name, "n<i>".
func (c *Cluster) Name(i int) string { return c.nodes[i].name }

// URL is the comma-separated client URLs of every node (running or not), as --nats takes them.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.ClientURL(i)
	}
	return strings.Join(urls, ",")
}

// ClientURL is node i's client URL, "nats://127.0.0.1:<port>".
func (c *Cluster) ClientURL(i int) string { return "nats://" + c.nodes[i].client }

// MonitorURL is node i's monitoring base URL, "http://127.0.0.1:<port>" (/healthz, /jsz, ...).
func (c *Cluster) MonitorURL(i int) string { return "http://" + c.nodes[i].monitor }

// Log is what node i has written so far, over all its starts.
func (c *Cluster) Log(i int) string { return c.nodes[i].log.String() }

// Running reports whether node i's process is alive.
func (c *Cluster) Running(i int) bool {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.running()
}

// Kill sends SIGKILL to node i and waits for the process to exit. A node that is not running
// is left alone.
func (c *Cluster) Kill(i int) {
	if c.check(i) {
		c.signal(i, syscall.SIGKILL, 0)
	}
}

// Stop sends SIGTERM to node i (a clean shutdown) and waits for the process to exit, sending
// SIGKILL after 15 s.
func (c *Cluster) Stop(i int) {
	if c.check(i) {
		c.signal(i, syscall.SIGTERM, stopTimeout)
	}
}

// Restart starts node i again with the same ports, configuration and store directory, after
// stopping it (SIGTERM) when it is still running. It does not wait for the node to be ready:
// call WaitReady.
func (c *Cluster) Restart(i int) {
	if !c.check(i) {
		return
	}
	c.Stop(i)
	if err := c.start(i); err != nil {
		c.t.Errorf("natstest: restart: %v", err)
	}
}

// WaitReady waits until every running node answers 200 on /healthz (JetStream current with the
// meta group, its streams and consumers healthy) and a meta leader is elected, or ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	var last error
	for {
		last = c.ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natstest: cluster not ready: %w (%v)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) ready(ctx context.Context) error {
	for i, nd := range c.nodes {
		if !c.Running(i) {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.MonitorURL(i)+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("node %s /healthz: %w", nd.name, err)
		}
		body, _ := readAll(resp)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node %s /healthz: %s: %s", nd.name, resp.Status, strings.TrimSpace(string(body)))
		}
	}
	_, err := c.leader(ctx, "")
	return err
}

// MetaLeader waits until a running node reports itself the JetStream meta leader (and no other
// running node does) and returns its index, or the error of the last probe when ctx ends.
func (c *Cluster) MetaLeader(ctx context.Context) (int, error) {
	return c.waitLeader(ctx, "")
}

// StreamLeader waits until a running node reports itself the leader of stream (in any
// account; from its monitoring endpoint /jsz) and no other running node does, and returns its
// index, or the error of the last probe when ctx ends.
func (c *Cluster) StreamLeader(ctx context.Context, stream string) (int, error) {
	if stream == "" {
		return -1, errors.New("natstest: StreamLeader of an empty stream name")
	}
	return c.waitLeader(ctx, stream)
}

func (c *Cluster) waitLeader(ctx context.Context, stream string) (int, error) {
	for {
		i, err := c.leader(ctx, stream)
		if err == nil {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("natstest: %w (%v)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// jsz is the part of a node's /jsz answer the harness reads.
type jsz struct {
	Meta *struct {
		Leader string `json:"leader"`
	} `json:"meta_cluster"`
	Accounts []struct {
		Streams []struct {
			Name    string `json:"name"`
			Cluster *struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// leader is one probe of every running node: the index of the single node that says it leads
// the meta group (stream == "") or the stream.
func (c *Cluster) leader(ctx context.Context, stream string) (int, error) {
	what := "the meta group"
	if stream != "" {
		what = "stream " + stream
	}
	found := -1
	for i, nd := range c.nodes {
		if !c.Running(i) {
			continue
		}
		var j jsz
		if err := c.getJSON(ctx, c.MonitorURL(i)+"/jsz?accounts=true&streams=true", &j); err != nil {
			return -1, fmt.Errorf("node %s /jsz: %w", nd.name, err)
		}
		claims := false
		if stream == "" {
			claims = j.Meta != nil && j.Meta.Leader == nd.name
		} else {
			for _, a := range j.Accounts {
				for _, s := range a.Streams {
					if s.Name == stream && s.Cluster != nil && s.Cluster.Leader == nd.name {
						claims = true
					}
				}
			}
		}
		if !claims {
			continue
		}
		if found >= 0 {
			return -1, fmt.Errorf("nodes %s and %s both say they lead %s", c.nodes[found].name, nd.name, what)
		}
		found = i
	}
	if found < 0 {
		return -1, fmt.Errorf("no running node leads %s", what)
	}
	return found, nil
}

func (c *Cluster) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	body, err := readAll(resp)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}
