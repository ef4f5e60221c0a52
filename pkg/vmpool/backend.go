package vmpool

import (
	"context"
	"errors"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// VMSpec names one VM of a backend. The pool passes it back to every
// Backend call; a backend keeps whatever else it needs about the VM (vmx
// path, container name, URL) itself, keyed by ID.
type VMSpec struct {
	// ID names the VM in the pool, in logs, in errors and in trajectories.
	// It is unique within the pool and matches [A-Za-z0-9][A-Za-z0-9_.-]*.
	ID string
	// Key identifies the machine itself on this host, whatever the pool
	// file calls it: "vmware:/vms/a/a.vmx", "guest:10.0.0.5:5000",
	// "docker:codapipe-pool1-vm0". The cross-process lock file is named
	// after it, so two pool files that give one machine different ids still
	// exclude each other. Empty means "<backend name>:<ID>".
	Key string
	// Label describes the VM for people (a vmx path, a URL, an image).
	Label string
}

// Endpoint is where a started VM's servers answer.
type Endpoint struct {
	// GuestURL is the OSWorld/ScienceBoard guest server, "http://host:5000".
	GuestURL string
	// StateURL is ScienceBoard's app-state server; "" means the guest's
	// host on port 8000 (see guest.Options.StateURL).
	StateURL string
}

// Backend drives one kind of VM. The backends are packages of their own:
// simvm (the simulator's guest servers, "sim"), hosts (any machine
// running the guest server, "guest"), vmware (VMware through vmrun) and
// docker (OSWorld-style containers); package poolfile builds the one a
// pool file names. Any other implementation may drive a pool too.
//
// The pool calls a backend from several goroutines at once, but never two
// calls for the same VM at the same time (except Stop during Close after a
// call that ignored its context). Every call gets a context with a deadline
// and must return when it ends; a call that has not returned by then makes
// the pool quarantine the VM. Errors should name the VM and the operation
// and say what the user can do.
type Backend interface {
	// Name is the backend's name: "sim", "guest", "vmware", "docker".
	Name() string
	// VMs lists the backend's VMs. The pool calls it once, first; a backend
	// does its host-wide setup here (the docker backend takes its pool lock
	// and removes containers an interrupted run left behind).
	VMs(ctx context.Context) ([]VMSpec, error)
	// Start brings a VM up in its clean state (its snapshot, a fresh
	// container) and returns once its guest server answers. The pool calls
	// it once per VM before the VM's first lease (again only after a failed
	// Start).
	Start(ctx context.Context, vm VMSpec) (Endpoint, error)
	// Reset returns a VM to its clean state — revert the snapshot, recreate
	// the container — and returns once its guest server answers. The
	// endpoint may differ from the last one (a new IP, new host ports).
	Reset(ctx context.Context, vm VMSpec) (Endpoint, error)
	// Health checks that a VM is usable now, through g, the pool's client of
	// the VM's guest server (typically one screenshot).
	Health(ctx context.Context, vm VMSpec, g *guest.Client) error
	// Stop is called by Pool.Close for every VM the pool started. A backend
	// does what its configuration asks: the docker backend removes the
	// container, vmware stops the VM only with stop_on_close, sim and guest
	// run their stop command if any.
	Stop(ctx context.Context, vm VMSpec) error
	// Close releases the backend's own resources after the last Stop (the
	// docker backend removes every container with its pool label).
	Close(ctx context.Context) error
}

// ErrStuck is matched by the error of a VM that did not become ready within
// its deadline after a start or revert: no IP, no answer from its guest
// server, a vmrun or docker call that never returned. The pool quarantines
// such a VM at once.
var ErrStuck = errors.New("vmpool: VM is stuck")
