package backendkit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// Validator collects the *vmpool.ConfigError values of a backend's
// configuration. Its zero value is ready to use.
type Validator struct{ errs []error }

// Add records that field's value cannot work: format and args say why
// and what is expected.
func (v *Validator) Add(field, format string, args ...any) {
	v.errs = append(v.errs, &vmpool.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Err joins the errors added, or is nil.
func (v *Validator) Err() error { return errors.Join(v.errs...) }

// NonEmpty checks that a list of field has entries (n of them); what
// says what an entry looks like.
func (v *Validator) NonEmpty(field string, n int, what string) {
	if n == 0 {
		v.Add(field, "empty; want at least one %s", what)
	}
}

// GuestVM checks a VM that the backend reaches at fixed URLs (see
// GuestAddrs): field.id may be empty (the default id), field.url is
// required, field.state_url may be empty (the default app server).
func (v *Validator) GuestVM(field, id, url, stateURL string) {
	v.VMID(field+".id", id)
	v.URL(field+".url", url)
	if stateURL != "" {
		if _, err := guest.ParseURL(stateURL, guest.DefaultStatePort); err != nil {
			v.Add(field+".state_url", "%v (want a URL such as http://10.0.0.5:8000)", err)
		}
	}
}

// VMID checks a VM id; "" (the default id) is fine.
func (v *Validator) VMID(field, id string) {
	if id != "" && !vmpool.ValidID(id) {
		v.Add(field, "%q: want letters, digits, '.', '_' and '-', starting with a letter or digit", id)
	}
}

// URL checks a guest server's URL, which is required.
func (v *Validator) URL(field, u string) {
	if u == "" {
		v.Add(field, "missing; want the guest server's URL, e.g. http://10.0.0.5:5000")
		return
	}
	if _, err := guest.ParseURL(u, guest.DefaultPort); err != nil {
		v.Add(field, "%v (want a URL such as http://10.0.0.5:5000)", err)
	}
}

// Positive checks a duration; zero (the default) is fine.
func (v *Validator) Positive(field string, d time.Duration) {
	if d < 0 {
		v.Add(field, "%v: want a positive duration", d)
	}
}

// Port checks a port number; zero (the default) is fine.
func (v *Validator) Port(field string, p int) {
	if p < 0 || p > 65535 {
		v.Add(field, "%d: want a port number, 1-65535", p)
	}
}

// Env checks a list of NAME=value environment variables.
func (v *Validator) Env(field string, env []string) {
	for i, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			v.Add(fmt.Sprintf("%s[%d]", field, i), "%q: want NAME=value", e)
		}
	}
}
