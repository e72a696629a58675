package testnet

// JSONAt walks a decoded JSON value (maps of any) by keys: nil where a key
// is missing or a value on the way is not an object.
func JSONAt(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}
