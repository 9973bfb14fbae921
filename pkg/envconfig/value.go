package envconfig

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Generic values are what JSON decodes into any: map[string]any, []any,
// string, float64, bool and nil. Parameters and target.with are generic.

// clone returns a deep copy of a generic value.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	default:
		return v
	}
}

// cloneMap returns a deep copy of m; nil stays nil.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = clone(v)
	}
	return out
}

// mergeMaps deep-merges over into base and returns the result, sharing
// nothing with either: mappings merge key by key, any other value of over
// (lists and null included) replaces base's.
func mergeMaps(base, over map[string]any) map[string]any {
	if base == nil && over == nil {
		return nil
	}
	out := cloneMap(base)
	if out == nil {
		out = make(map[string]any, len(over))
	}
	for k, ov := range over {
		bm, bok := out[k].(map[string]any)
		om, ook := ov.(map[string]any)
		if bok && ook {
			out[k] = mergeMaps(bm, om)
			continue
		}
		out[k] = clone(ov)
	}
	return out
}

// equal reports whether two generic values are the same JSON value, so an
// int read from YAML equals the same float64 read from JSON.
func equal(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// overrides returns the paths (below at) where merging over into base
// changes base: the leaves where the two differ. A value equal to base's,
// or a mapping whose keys all equal base's, overrides nothing.
func overrides(base, over any, at []string) [][]string {
	om, ook := over.(map[string]any)
	bm, bok := base.(map[string]any)
	if ook && bok {
		var out [][]string
		for _, k := range sortedKeys(om) {
			bv, has := bm[k]
			if !has {
				out = append(out, with(at, k))
				continue
			}
			out = append(out, overrides(bv, om[k], with(at, k))...)
		}
		return out
	}
	if equal(base, over) {
		return nil
	}
	return [][]string{at}
}

// with returns path extended by tokens, never sharing path's array.
func with(path []string, tokens ...string) []string {
	out := make([]string, 0, len(path)+len(tokens))
	return append(append(out, path...), tokens...)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
