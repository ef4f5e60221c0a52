package backendkit

import (
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// GuestAddrs normalizes the addresses of a VM that the backend reaches at
// fixed URLs (the "guest" and "sim" backends' vms entries), checked by
// Validator.GuestVM: the guest server's URL (port 5000 by default) and,
// when given, the app server's (port 8000 by default; "" stays ""). key
// is the VM's vmpool.VMSpec.Key: one guest server, one machine, whichever
// backend lists it.
func GuestAddrs(guestURL, stateURL string) (ep vmpool.Endpoint, key string) {
	u, _ := guest.ParseURL(guestURL, guest.DefaultPort)
	ep.GuestURL = u.String()
	if stateURL != "" {
		s, _ := guest.ParseURL(stateURL, guest.DefaultStatePort)
		ep.StateURL = s.String()
	}
	return ep, "guest:" + u.Host
}
