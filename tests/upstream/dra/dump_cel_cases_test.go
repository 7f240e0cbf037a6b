package cel

import (
	"encoding/json"
	"os"
	"sort"
	"testing"
)

func TestDumpCases(t *testing.T) {
	path := os.Getenv("CEL_DUMP")
	if path == "" {
		t.Skip()
	}
	var out []map[string]any
	for name, tc := range testcases {
		features := ""
		if tc.features != nil {
			b, _ := json.Marshal(tc.features)
			features = string(b)
		}
		env := ""
		if tc.envType != nil {
			env = string(*tc.envType)
		}
		out = append(out, map[string]any{
			"name": name, "expression": tc.expression, "driver": tc.driver,
			"allowMultipleAllocations": tc.allowMultipleAllocations,
			"attributes": tc.attributes, "capacity": tc.capacity,
			"expectCompileError": tc.expectCompileError, "expectMatchError": tc.expectMatchError,
			"expectMatch": tc.expectMatch, "expectCost": tc.expectCost, "features": features, "envType": env,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["name"].(string) < out[j]["name"].(string) })
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b, 0o644)
}
