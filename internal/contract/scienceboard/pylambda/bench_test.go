package pylambda

import (
	"context"
	"testing"
)

// GRASS GIS B-03: the key digs a layer's parameter out of the dump's
// windows, the predicate checks the words of its value.
const (
	benchKey  = "lambda dump: [param for param in [item for item in dump['windows'] if item['name'] == 'boundary_region@PERMANENT'][0]['_data'][1]['params'] if param['name'] == 'display']"
	benchPred = "lambda key, value: all([val in key[0]['value'] for val in value])"
)

func benchDump(b *testing.B) any {
	doc := readGolden(b)
	raw, ok := doc.Inputs["GrassGIS/goal"]
	if !ok {
		b.Fatal("no GrassGIS/goal input in golden.json")
	}
	var dump any = raw
	return dump
}

// benchValue is the words the predicate looks for.
var benchValue = []any{"cat", "topo"}

// compileBench compiles the benchmark's key and predicate.
func compileBench(b *testing.B) (key, pred *Lambda) {
	key, err := Compile(benchKey)
	if err != nil {
		b.Fatal(err)
	}
	pred, err = Compile(benchPred)
	if err != nil {
		b.Fatal(err)
	}
	return key, pred
}

// callBench evaluates the key on dump and the predicate on what it
// returns, which must hold.
func callBench(ctx context.Context, b *testing.B, key, pred *Lambda, dump any) {
	k, err := key.Call(ctx, dump)
	if err != nil {
		b.Fatal(err)
	}
	if ok, err := pred.Truth(ctx, k, benchValue); err != nil || !ok {
		b.Fatalf("pred = %v, %v", ok, err)
	}
}

// BenchmarkGrassCompileCall compiles a typical GRASS key and predicate and
// evaluates them on a dump given as raw JSON, as an evaluator does once
// per check.
func BenchmarkGrassCompileCall(b *testing.B) {
	dump := benchDump(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		key, pred := compileBench(b)
		callBench(ctx, b, key, pred, dump)
	}
}

// BenchmarkGrassCall evaluates the precompiled key and predicate.
func BenchmarkGrassCall(b *testing.B) {
	dump := benchDump(b)
	ctx := context.Background()
	key, pred := compileBench(b)
	b.ReportAllocs()
	for b.Loop() {
		callBench(ctx, b, key, pred, dump)
	}
}
