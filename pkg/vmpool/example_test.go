package vmpool_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
)

// simGuest starts a stand-in for one of the simulator's guest servers:
// POST /sim/reset and GET /sim/health (which reports the app server; here
// the stand-in itself), which the sim backend uses, POST /setup/execute
// for the command the pool runs after a revert (ScienceBoard's reset.sh),
// and GET /screenshot for the lease's guest client.
func simGuest() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sim/reset", "/sim/health":
			fmt.Fprintf(w, `{"status": "ok", "app_url": "http://%s"}`, r.Host)
		case "/setup/execute":
			fmt.Fprint(w, `{"status": "success", "output": "", "error": "", "returncode": 0}`)
		case "/screenshot":
			w.Write([]byte("\x89PNG\r\n\x1a\n...")) // a PNG's signature is enough here
		default:
			http.NotFound(w, r)
		}
	}))
}

// examplePool starts n stand-ins for simulated guests and returns a pool
// over them, with its lock files in a directory of its own, and a func
// that closes the pool and stops the guests.
func examplePool(ctx context.Context, n int) (*vmpool.Pool, func()) {
	var urls []string
	var guests []*httptest.Server
	for range n {
		g := simGuest()
		guests = append(guests, g)
		urls = append(urls, g.URL)
	}
	backend, err := simvm.New(simvm.URLs(urls...))
	if err != nil {
		log.Fatal(err)
	}
	lockDir, err := os.MkdirTemp("", "vmpool-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := vmpool.Config{ID: "example", LockDir: lockDir, IdleCheck: -1}
	pool, err := vmpool.NewPool(ctx, cfg, backend, vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	return pool, func() {
		pool.Close(context.Background())
		for _, g := range guests {
			g.Close()
		}
		os.RemoveAll(lockDir)
	}
}

// waitReady polls until every VM of pool is ready.
func waitReady(pool *vmpool.Pool) {
	for pool.Stats().Ready < pool.Size() {
		time.Sleep(time.Millisecond)
	}
}

// A pool over a backend (here the simulator's guest servers): lease a VM,
// drive it through its guest client, end the lease.
func ExampleNewPool() {
	g := simGuest()
	defer g.Close()
	ctx := context.Background()

	backend, err := simvm.New(simvm.URLs(g.URL))
	if err != nil {
		log.Fatal(err)
	}
	lockDir, err := os.MkdirTemp("", "vmpool-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(lockDir)
	cfg := vmpool.Config{ID: "example", LockDir: lockDir, QuarantineAfter: 3}
	pool, err := vmpool.NewPool(ctx, cfg, backend, vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close(context.Background())

	lease, err := pool.Lease(ctx) // waits until the VM is reset and healthy
	if err != nil {
		log.Fatal(err)
	}
	png, err := lease.Guest().Screenshot(ctx)
	if err != nil {
		lease.End(vmpool.Fault(err))
		log.Fatal(err)
	}
	fmt.Printf("%s: %d VM(s), screenshot of %d bytes\n", lease.ID(), pool.Size(), len(png))
	fmt.Println(lease.End(vmpool.Healthy))
	// Output:
	// sim-0: 1 VM(s), screenshot of 11 bytes
	// <nil>
}

// Avoid asks for another VM than those an episode failed on; an avoided VM
// is handed out only when no other VM is left in the pool's hands.
func ExampleAvoid() {
	ctx := context.Background()
	pool, done := examplePool(ctx, 2)
	defer done()
	waitReady(pool)

	lease, err := pool.Lease(ctx, vmpool.Avoid("sim-0"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("avoiding sim-0:", lease.ID())
	lease.End(vmpool.Unused)
	// Output:
	// avoiding sim-0: sim-1
}

// End hands a lease back with a verdict on the VM: Healthy (it worked,
// whatever the episode's outcome; the VM is reset), Fault (it failed the
// caller; counted toward quarantine, the VM is reset) or Unused (no guest
// call was made: ready again at once, no reset).
func ExampleLease_End() {
	ctx := context.Background()
	pool, done := examplePool(ctx, 1)
	defer done()

	for _, verdict := range []vmpool.Verdict{
		vmpool.Unused,
		vmpool.Fault(errors.New("guest stopped answering")),
		vmpool.Healthy,
	} {
		lease, err := pool.Lease(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := lease.End(verdict); err != nil {
			log.Fatal(err)
		}
		if err := lease.End(vmpool.Healthy); errors.Is(err, vmpool.ErrReleased) {
			fmt.Println("a second End:", err)
		}
	}
	st := pool.Stats()
	fmt.Printf("leases %d: %d unused, %d ended Healthy or Fault, %d of them Fault\n",
		st.Leases, st.Returns, st.Releases, st.UnhealthyReleases)
	// Output:
	// a second End: vmpool: lease already ended (vm sim-0)
	// a second End: vmpool: lease already ended (vm sim-0)
	// a second End: vmpool: lease already ended (vm sim-0)
	// leases 3: 1 unused, 2 ended Healthy or Fault, 1 of them Fault
}

// Lease blocks until a VM is ready or ctx ends; with every VM quarantined
// it returns ErrNoVMs at once, after Close ErrClosed.
func ExamplePool_Lease() {
	ctx := context.Background()
	pool, done := examplePool(ctx, 1)
	defer done()

	lease, err := pool.Lease(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The only VM is out: a second Lease waits until its context ends.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = pool.Lease(wctx)
	cancel()
	fmt.Println("while sim-0 is out:", errors.Is(err, context.DeadlineExceeded))
	lease.End(vmpool.Unused)

	pool.Close(context.Background())
	_, err = pool.Lease(ctx)
	fmt.Println("after Close:", err)
	// Output:
	// while sim-0 is out: true
	// after Close: vmpool: pool is closed
}
