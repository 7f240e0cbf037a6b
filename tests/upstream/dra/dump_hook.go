// Dropped into a copy of k8s.io/dynamic-resource-allocation's structured/internal/allocatortesting
// by regenerate.sh (never built by the project): each case of upstream's shared allocator test
// table is written as JSON with what the allocator variant under test returned and whether
// upstream's own assertions passed, so the Python port runs the same inputs against the same answers.

package allocatortesting

import (
	"encoding/json"
	"errors"
	"os"
	"sort"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

var (
	dumpMu    sync.Mutex
	dumpCases []map[string]any
)

func recordCase(t *testing.T, table, name string, tc AllocatorTestCase, results []resourceapi.AllocationResult, err error, allocator Allocator) {
	if os.Getenv("DRA_DUMP") == "" {
		return
	}
	claims := make([]*resourceapi.ResourceClaim, 0, len(tc.claimsToAllocate))
	for _, c := range tc.claimsToAllocate {
		claims = append(claims, c.obj())
	}
	devices := []string{}
	for _, d := range tc.allocatedDevices {
		devices = append(devices, d.String())
	}
	shared := []string{}
	for d := range tc.allocatedSharedDeviceIDs {
		shared = append(shared, d.String())
	}
	sort.Strings(shared)
	capacity := map[string]map[string]string{}
	for id, consumed := range tc.allocatedCapacityDevices {
		m := map[string]string{}
		for name, q := range consumed {
			m[string(name)] = q.String()
		}
		capacity[id.String()] = m
	}
	out := make([]resourceapi.AllocationResult, len(results))
	for i := range results {
		r := *results[i].DeepCopy()
		for j := range r.Devices.Results {
			if r.Devices.Results[j].ShareID != nil {
				r.Devices.Results[j].ShareID = &fixedShareID
			}
		}
		out[i] = r
	}
	rec := map[string]any{
		"table":                    table,
		"name":                     name,
		"features":                 sets.List(tc.features.Set()),
		"claims":                   claims,
		"classes":                  tc.classes,
		"slices":                   tc.slices,
		"node":                     tc.node,
		"allocatedDevices":         devices,
		"allocatedSharedDeviceIDs": shared,
		"allocatedCapacity":        capacity,
		"results":                  out,
		"error":                    nil,
		"failedOnNode":             false,
		"expectNumAllocateOne":     tc.expectNumAllocateOneInvocations,
	}
	if err != nil {
		rec["error"] = err.Error()
		rec["failedOnNode"] = errors.Is(err, internal.ErrFailedAllocationOnNode)
	}
	if extended, ok := allocator.(internal.AllocatorExtended); ok {
		rec["numAllocateOne"] = extended.GetStats().NumAllocateOneInvocations
		if override, ok := tc.expectNumAllocateOneInvocationsByChannel[allocator.Channel()]; ok && tc.expectNumAllocateOneInvocations > 0 {
			rec["expectNumAllocateOne"] = override
		}
	}
	t.Cleanup(func() {
		rec["upstreamPassed"] = !t.Failed()
		dumpMu.Lock()
		defer dumpMu.Unlock()
		dumpCases = append(dumpCases, rec)
	})
}

func recordSkipped(table, name string, tc AllocatorTestCase, missing []string) {
	if os.Getenv("DRA_DUMP") == "" {
		return
	}
	dumpMu.Lock()
	defer dumpMu.Unlock()
	dumpCases = append(dumpCases, map[string]any{"table": table, "name": name, "skipped": missing, "features": sets.List(tc.features.Set())})
}

func writeDump(t *testing.T) {
	path := os.Getenv("DRA_DUMP")
	if path == "" {
		return
	}
	dumpMu.Lock()
	defer dumpMu.Unlock()
	sort.Slice(dumpCases, func(i, j int) bool {
		a, b := dumpCases[i], dumpCases[j]
		if a["table"] != b["table"] {
			return a["table"].(string) < b["table"].(string)
		}
		return a["name"].(string) < b["name"].(string)
	})
	data, err := json.MarshalIndent(dumpCases, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
