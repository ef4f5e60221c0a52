// Package guest is a client of the OSWorld/ScienceBoard guest server: the
// HTTP server (port 5000, no authentication) inside a GUI agent's VM that
// takes screenshots, runs commands and pyautogui code, reads the
// accessibility tree and moves files, and of ScienceBoard's app servers
// (port 8000: the modified application's own HTTP server). Every VM backend of package vmpool drives its VMs
// through this one client, and a lease hands one out (Lease.Guest); it
// needs nothing of the pool, so a program may use it alone to talk to any
// OSWorld guest.
//
// Every call has a deadline (the per-call timeout of [Options] and the
// caller's context, whichever ends first): the clients in the wild had no
// timeout on /accessibility and hung for hours. Idempotent calls are
// retried on transport errors and 5xx answers; /execute and the other
// calls that change the guest are not (see [Client.Execute]). The protocol
// as this client speaks it is written down in docs/guest-protocol.md.
//
// The files: client.go (Client, its options and construction), command.go
// (commands and their results), errors.go (the errors a call returns),
// transport.go (one call: deadlines, retries, answers) and calls.go (the
// protocol's endpoints).
package guest
