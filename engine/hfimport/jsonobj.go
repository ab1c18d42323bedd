package hfimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// object is a JSON object of a Hugging Face config file, read with
// json.Number so that integers stay exact. Its getters tell a key that is
// absent (the class default applies) from one that is null (the feature is
// off, as Python's None), and name the file and key in every error.
type object struct {
	file string         // for errors
	path string         // the key path of this object inside the file, "" at the top
	m    map[string]any // nil for an absent object
}

func readObject(path string) (object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return object{}, fmt.Errorf("hfimport: %w", err)
	}
	return parseObject(path, data)
}

// readArray parses data, file's JSON array of objects (modules.json).
func readArray(file string, data []byte) ([]object, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var list []map[string]any
	if err := d.Decode(&list); err != nil {
		return nil, fmt.Errorf("hfimport: %s: %w", file, err)
	}
	out := make([]object, len(list))
	for i, m := range list {
		out[i] = object{file: fmt.Sprintf("%s[%d]", file, i), m: m}
	}
	return out, nil
}

func parseObject(file string, data []byte) (object, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return object{}, fmt.Errorf("hfimport: %s: %w", file, err)
	}
	return object{file: file, m: m}, nil
}

func (o object) name(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

func (o object) errorf(key, format string, args ...any) error {
	return fmt.Errorf("hfimport: %s: %s: %s", o.file, o.name(key), fmt.Sprintf(format, args...))
}

// has reports whether key is present and not null.
func (o object) has(key string) bool { return o.m[key] != nil }

// isNull reports whether key is present with the value null.
func (o object) isNull(key string) bool {
	v, ok := o.m[key]
	return ok && v == nil
}

// obj is the object under key; an absent or null key gives an empty object.
func (o object) obj(key string) (object, error) {
	sub := object{file: o.file, path: o.name(key)}
	v := o.m[key]
	if v == nil {
		return sub, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return sub, o.errorf(key, "is %T, want an object", v)
	}
	sub.m = m
	return sub, nil
}

func (o object) float(key string, def float64) (float64, error) {
	v := o.m[key]
	if v == nil {
		return def, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, o.errorf(key, "is %v, want a number", v)
	}
	f, err := n.Float64()
	if err != nil {
		return 0, o.errorf(key, "%v", err)
	}
	return f, nil
}

func (o object) int(key string, def int) (int, error) {
	v := o.m[key]
	if v == nil {
		return def, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, o.errorf(key, "is %v, want an integer", v)
	}
	i, err := n.Int64()
	if err != nil {
		// Some configs write integers as 4096.0.
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) {
			return 0, o.errorf(key, "is %v, want an integer", v)
		}
		i = int64(f)
	}
	if i < math.MinInt32 || i > math.MaxInt32 {
		return 0, o.errorf(key, "%d is out of range", i)
	}
	return int(i), nil
}

func (o object) bool(key string, def bool) (bool, error) {
	v := o.m[key]
	if v == nil {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, o.errorf(key, "is %v, want true or false", v)
	}
	return b, nil
}

func (o object) str(key, def string) (string, error) {
	v := o.m[key]
	if v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.errorf(key, "is %v, want a string", v)
	}
	return s, nil
}

// ints reads key as an integer or a list of integers (eos_token_id is
// either).
func (o object) ints(key string) ([]int, error) {
	v := o.m[key]
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	out := make([]int, 0, len(list))
	for _, x := range list {
		n, ok := x.(json.Number)
		if !ok {
			return nil, o.errorf(key, "has %v, want integers", x)
		}
		i, err := n.Int64()
		if err != nil || i < 0 || i > math.MaxInt32 {
			return nil, o.errorf(key, "has %v, want token ids", x)
		}
		out = append(out, int(i))
	}
	return out, nil
}

// floats reads key as a list of numbers (LongRoPE's factors).
func (o object) floats(key string) ([]float64, error) {
	v := o.m[key]
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, o.errorf(key, "is %v, want a list of numbers", v)
	}
	out := make([]float64, 0, len(list))
	for _, x := range list {
		n, ok := x.(json.Number)
		if !ok {
			return nil, o.errorf(key, "has %v, want numbers", x)
		}
		f, err := n.Float64()
		if err != nil {
			return nil, o.errorf(key, "%v", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// strs reads key as a list of strings.
func (o object) strs(key string) ([]string, error) {
	v := o.m[key]
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, o.errorf(key, "is %v, want a list of strings", v)
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, o.errorf(key, "has %v, want strings", x)
		}
		out[i] = s
	}
	return out, nil
}
