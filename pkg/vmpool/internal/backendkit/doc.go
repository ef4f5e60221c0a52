// Package backendkit is the code that the VM backends of package vmpool
// share: running local commands (vmrun, docker, reset scripts) under a
// deadline in a process group of their own (Run), waiting until a VM's
// guest server answers (WaitReady, WaitGuest), and giving a backend's
// configuration its defaults and checking it (Prepare, Validator).
package backendkit
