package simvm_test

import (
	"context"
	"fmt"
	"log"

	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
)

// URLs lists the simulator's guest servers; the VMs are called sim-0,
// sim-1, ... (New starts nothing: the simulator runs the servers).
func ExampleURLs() {
	b, err := simvm.New(simvm.URLs("http://127.0.0.1:5001", "127.0.0.1:5002"))
	if err != nil {
		log.Fatal(err)
	}
	specs, _ := b.VMs(context.Background())
	for _, s := range specs {
		fmt.Println(s.ID, s.Key, s.Label)
	}
	// Output:
	// sim-0 guest:127.0.0.1:5001 simulated guest http://127.0.0.1:5001
	// sim-1 guest:127.0.0.1:5002 simulated guest http://127.0.0.1:5002
}
