package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFactoryReusesRegisteredMetrics: a second factory on one registry
// gets the metrics the first registered, so counts go on; a nil registry
// registers nothing.
func TestFactoryReusesRegisteredMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := On(reg).CounterVec("x_total", "x", "kind")
	a.WithLabelValues("k").Add(2)
	b := On(reg).CounterVec("x_total", "x", "kind")
	b.WithLabelValues("k").Inc()
	if got := testutil.ToFloat64(a.WithLabelValues("k")); got != 3 {
		t.Fatalf("count %v, want 3: the second factory made a new metric", got)
	}
	if n, err := testutil.GatherAndCount(reg, "x_total"); err != nil || n != 1 {
		t.Fatalf("%d series (%v), want 1", n, err)
	}
	c := On(nil).Counter("y_total", "y")
	c.Inc()
	if n, _ := testutil.GatherAndCount(reg, "y_total"); n != 0 {
		t.Fatal("a nil registry registered a metric")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a metric of the same name and another kind did not panic")
		}
	}()
	On(reg).Gauge("x_total", "x")
}
