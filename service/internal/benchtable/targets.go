package main

// targets are the project's performance targets. Each entry applies to
// every benchmark whose name contains Match; a benchmark may have several.
// Adding a target is adding a line.
var targets = []Target{
	{ID: "W1", Match: "W1Fill", Unit: "ns/op", Cmp: AtMost, Value: 50},
	{ID: "W1", Match: "W1Fill", Unit: "allocs/op", Cmp: Equal, Value: 0},
	{ID: "W1", Match: "W1Churn", Unit: "ns/op", Cmp: AtMost, Value: 100},
	{ID: "W1", Match: "W1Churn", Unit: "allocs/op", Cmp: Equal, Value: 0},
	{ID: "W2", Match: "W2BestFit", Unit: "ns/op", Cmp: AtMost, Value: 1000},
	{ID: "W3", Match: "W3Select", Unit: "ns/op", Cmp: AtMost, Value: 1000},
	{ID: "W4", Match: "W4Ratio", Unit: "ratio", Cmp: AtLeast, Value: 0.90},
	{ID: "W4", Match: "W4SyncAddrsPerSec", Unit: "addrs/s", Cmp: AtLeast, Value: 1e6},
	{ID: "W5", Match: "W5DurableAllocsPerSec", Unit: "allocs/s", Cmp: AtLeast, Value: 10000},
	{ID: "N1", Match: "N1NodeAllocate/callers=1", Unit: "p99-ms", Cmp: AtMost, Value: 2},
	{ID: "N1", Match: "N1NodeAllocate/callers=64", Unit: "allocs/s", Cmp: AtLeast, Value: 5000},
	{ID: "W6", Match: "W6HeapBytesPerAlloc", Unit: "B/alloc", Cmp: AtMost, Value: 64},
	{ID: "W6", Match: "W6RestartSeconds", Unit: "s", Cmp: AtMost, Value: 1},
	{ID: "W7", Match: "W7RenderRatio", Unit: "ratio", Cmp: AtMost, Value: 2},
	{ID: "W8", Match: "W8MixedLoad", Unit: "calls/s", Cmp: AtLeast, Value: 5000},
	{ID: "W8", Match: "W8MixedLoad", Unit: "p99-ms", Cmp: AtMost, Value: 50},
	{ID: "W9", Match: "W9Fleet", Unit: "ratio", Cmp: AtLeast, Value: 0.8},
	{ID: "W9", Match: "W9Fleet", Unit: "ratio-p50", Cmp: AtLeast, Value: 0.8},
	{ID: "W9", Match: "W9Fleet", Unit: "idle-reads/100drafts/min", Cmp: AtMost, Value: 1},
	{ID: "W9", Match: "W9Fleet", Unit: "reaction-p99-s", Cmp: AtMost, Value: 5},
	{ID: "E1", Match: "E1EtcdGroupCommit/vrfs=1", Unit: "etcd-allocs/s", Cmp: AtLeast, Value: 5000},
	{ID: "E1", Match: "E1EtcdGroupCommit/vrfs=8", Unit: "etcd-allocs/s", Cmp: AtLeast, Value: 8000},
	{ID: "E1", Match: "E1EtcdGroupCommit", Unit: "ratio", Cmp: AtLeast, Value: 0.25},
	{ID: "E1", Match: "E1EtcdGroupCommit/vrfs=1/mtls=true", Unit: "mtls-ratio", Cmp: AtLeast, Value: 0.8},
	{ID: "E1", Match: "E1EtcdGroupCommit/vrfs=8/mtls=true", Unit: "mtls-ratio", Cmp: AtLeast, Value: 0.8},
}
