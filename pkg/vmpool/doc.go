// Package vmpool leases virtual machines for rollouts.
//
// [Pool] leases ready VMs to workers and resets each one in the background
// as it comes back (reset-ahead), quarantining VMs that keep failing or get
// stuck; its backends are VMware (vmrun), Docker (OSWorld image), any
// machine running the guest server, and the simulator. A pool file
// (package poolfile) describes a real pool; docs/vmpool.md has the details.
//
// A lease's VM is driven through the guest HTTP client of package
// [github.com/codapipe/codapipe/pkg/vmpool/guest] ([Lease.Guest]), which
// speaks the OSWorld/ScienceBoard guest-server protocol; every backend
// checks its VMs through it too.
package vmpool
