// Package natstest starts real NATS servers with JetStream for tests.
//
// Start runs an embedded nats-server on a random loopback port with its file store in
// t.TempDir(), shut down when the test ends; StartEmbeddedCluster runs several embedded servers
// as one cluster in the test's process. StartCluster (cluster.go) runs an n-node JetStream
// cluster of separate nats-server processes, which a test can kill (SIGKILL), stop and restart
// one node at a time: the harness of the node-failure tests.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/nats-io/nats-server/v2/server"
)

// Server is a running test server.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
}

// Option adjusts the server options (auth, payload limit, ...).
type Option func(*server.Options)

// options are the settings of one test server: loopback, a random port,
// JetStream stored in a folder of the test, no signal handlers, no logs.
func options(t testing.TB, name string) server.Options {
	return server.Options{ServerName: name, Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
}

// Start starts a JetStream server for the test and registers its shutdown.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := options(t, "natstest")
	for _, f := range opts {
		f(&o)
	}
	s := &Server{t: t, opts: o}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	o := s.opts // NewServer keeps a pointer; give each start its own copy
	srv, err := server.NewServer(&o)
	if err != nil {
		s.t.Fatalf("natstest: %v", err)
	}
	go srv.Start() // owned by s: Shutdown stops it
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		s.t.Fatal("natstest: server not ready within 20s")
	}
	s.srv = srv
	// Keep the port across restarts so clients can reconnect.
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		s.opts.Port = a.Port
	}
}

// URL is the client URL.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Shutdown stops the server; calling it twice is fine.
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}

// EmbeddedCluster is a running in-process JetStream cluster of several servers.
type EmbeddedCluster struct {
	servers []*server.Server
}

// StartEmbeddedCluster starts a JetStream cluster of n embedded servers on
// loopback (random client and route ports, file stores in t.TempDir()),
// waits until it has elected a meta leader, and registers its shutdown. It
// is what a test needs to check replicated streams without the nats-server
// binary; StartCluster runs separate processes that can be killed.
func StartEmbeddedCluster(t testing.TB, n int) *EmbeddedCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := launchEmbedded(t, n)
		if err == nil {
			return c
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatalf("natstest: start a %d-server embedded cluster: %v", n, err)
		}
	}
}

// launchEmbedded is one attempt of StartEmbeddedCluster. It returns
// errPortTaken when a route port chosen up front was taken by another
// process before its server listened on it, so that StartEmbeddedCluster
// can try again with fresh ports.
func launchEmbedded(t testing.TB, n int) (*EmbeddedCluster, error) {
	t.Helper()
	c := &EmbeddedCluster{}
	// Route ports are chosen up front so every server can list all the
	// others (a clustered JetStream server opens its ports only once it
	// can reach its peers).
	addrs, err := servertest.FreeAddrs(n)
	if err != nil {
		return nil, fmt.Errorf("pick the route ports: %w", err)
	}
	// The stores are made before the shutdown is registered: cleanups run
	// last-registered first, so the servers stop before t.TempDir's folders
	// are removed (removing them under a running server fails the test with
	// "directory not empty"). Each attempt registers its own.
	opts := make([]server.Options, n)
	for i := range opts {
		o := options(t, fmt.Sprintf("natstest-%d", i))
		_, port, err := net.SplitHostPort(addrs[i])
		if err != nil {
			return nil, err
		}
		o.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1"}
		if o.Cluster.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("route address %s: %w", addrs[i], err)
		}
		for j, a := range addrs {
			if j != i {
				o.Routes = append(o.Routes, &url.URL{Scheme: "nats-route", Host: a})
			}
		}
		opts[i] = o
	}
	t.Cleanup(c.Shutdown)
	for i := range opts {
		srv, err := server.NewServer(&opts[i])
		if err != nil {
			return nil, fmt.Errorf("server %d: %w", i, err)
		}
		go srv.Start() // owned by c: Shutdown stops it
		c.servers = append(c.servers, srv)
	}
	for i, srv := range c.servers {
		if !srv.ReadyForConnections(30 * time.Second) {
			if srv.ClusterAddr() == nil { // its route listener failed: the port was taken
				c.Shutdown()
				return nil, fmt.Errorf("%w: server %d: no route listener on %s", errPortTaken, i, addrs[i])
			}
			return nil, fmt.Errorf("server %d not ready within 30s", i)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader := false
		for _, s := range c.servers {
			leader = leader || s.JetStreamIsLeader()
		}
		ready := true
		for _, s := range c.servers {
			ready = ready && s.JetStreamIsCurrent() && s.NumRoutes() >= n-1
		}
		if leader && ready {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the %d-server cluster elected no JetStream leader within 30s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is a comma-separated list of the servers' client URLs.
func (c *EmbeddedCluster) URL() string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Shutdown stops every server; calling it twice is fine.
func (c *EmbeddedCluster) Shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
	}
	for _, s := range c.servers {
		s.WaitForShutdown()
	}
	c.servers = nil
}

// TruncateStreamBlock cuts the last quarter off the first message block
// file (msgs/*.blk) of stream in the JetStream file store under storeDir
// (a server's StoreDir; the embedded server of the bus keeps it in
// <data>/nats): a disk that lost the end of a file. No server may be
// running on the store. On its next start the server recovers the messages
// before the cut and counts the rest as deleted.
func TruncateStreamBlock(t testing.TB, storeDir, stream string) {
	t.Helper()
	blks, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil || len(blks) == 0 {
		t.Fatalf("natstest: no block file of stream %s under %s (%v)", stream, storeDir, err)
	}
	sort.Strings(blks)
	fi, err := os.Stat(blks[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blks[0], fi.Size()*3/4); err != nil {
		t.Fatal(err)
	}
}

// FlipStreamBlockByte flips one bit of the byte in the middle of the
// first message block file of stream under storeDir (see
// TruncateStreamBlock): a disk that damaged a file without shortening it.
// No server may be running on the store.
func FlipStreamBlockByte(t testing.TB, storeDir, stream string) {
	t.Helper()
	blks, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil || len(blks) == 0 {
		t.Fatalf("natstest: no block file of stream %s under %s (%v)", stream, storeDir, err)
	}
	sort.Strings(blks)
	data, err := os.ReadFile(blks[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := os.WriteFile(blks[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
}
