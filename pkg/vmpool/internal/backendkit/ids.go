package backendkit

import (
	"cmp"
	"fmt"
	"slices"
)

// NameVMs returns a copy of vms in which every VM without an id (id points
// at a VM's id field) is called prefix-<its index>: sim-0, guest-1, ...
func NameVMs[VM any](vms []VM, prefix string, id func(*VM) *string) []VM {
	out := slices.Clone(vms)
	for i := range out {
		p := id(&out[i])
		*p = cmp.Or(*p, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
