// Package vmpool leases virtual machines for rollouts.
//
// [Pool] leases ready VMs to workers and resets each one in the background
// as it comes back (reset-ahead), quarantining VMs that keep failing or get
// stuck, and keeps processes apart with a lock file per VM. [NewPool]
// takes the pool's policy ([Config]) and a [Backend]; the backends are
// packages of their own — simvm (the simulator), hosts (any machine running
// the guest server), vmware (vmrun) and docker (OSWorld's image) — and
// package poolfile reads a pool file and builds the backend and the pool it
// describes. docs/vmpool.md has the details.
//
// A lease's VM is driven through the guest HTTP client of package
// [github.com/codapipe/codapipe/pkg/vmpool/guest] ([Lease.Guest]), which
// speaks the OSWorld/ScienceBoard guest-server protocol; every backend
// checks its VMs through it too.
package vmpool
