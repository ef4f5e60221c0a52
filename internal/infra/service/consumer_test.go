package service

import (
	"reflect"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

func TestStageConsumer(t *testing.T) {
	got := StageConsumer(bus.Judged, []string{"ChimeraX", "KAlgebra"}, bus.ConsumerSpec{Durable: "d", Workers: 500, MaxDeliver: 3, Drain: true})
	want := bus.ConsumerSpec{
		Stream: bus.StreamName(bus.Judged), Durable: "d",
		Filter:     []string{bus.Subject(bus.Judged, "ChimeraX"), bus.Subject(bus.Judged, "KAlgebra")},
		MaxDeliver: 3, MaxAckPending: 2000, Workers: 500, FetchWait: 250 * time.Millisecond, Drain: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StageConsumer = %+v, want %+v", got, want)
	}
	got = StageConsumer(bus.Raw, nil, bus.ConsumerSpec{Workers: 8})
	if got.Filter != nil || got.MaxAckPending != 1000 || got.FetchWait != time.Second || got.Stream != bus.StreamName(bus.Raw) {
		t.Errorf("StageConsumer of all apps = %+v", got)
	}
}
