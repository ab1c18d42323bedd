// Package structured constrains a generation to JSON, or to JSON that
// validates against a JSON schema: OpenAI's response_format json_object and
// json_schema, Ollama's format. A schema compiles to a tree of nodes
// (Compile); a Matcher reads output bytes against it as an incremental
// parser that knows, after every byte, whether the text so far can still
// become a valid document; a Constraint turns that into the set of tokens a
// sampler may pick at each step (model.Constraint).
//
// The JSON the matcher accepts is bounded so that any generation under it
// ends: at most maxSpace whitespace bytes in a row, numbers of at most
// maxDigits digits. Schemas use the subset of JSON Schema that structured
// output needs: type (one or a list), properties, required,
// additionalProperties, items, minItems, maxItems, minLength, maxLength,
// enum, const, anyOf, oneOf, allOf of one member, $ref to $defs or
// definitions, and the annotations (title, description, default, examples,
// $schema, $id, format). Any other keyword is refused by name, so a schema
// is never enforced only in part.
package structured

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The bounds that make every constrained generation finite.
const (
	maxSpace  = 16 // whitespace bytes in a row: a newline and an indent
	maxDigits = 16 // digits of a number, its fraction and exponent together
	// maxDepth bounds nesting where the schema does not (json_object, an
	// object's unknown values).
	maxDepth = 16
)

type kind int

const (
	kindAny kind = iota // any JSON value
	kindObject
	kindArray
	kindString
	kindNumber
	kindInteger
	kindBool
	kindNull
	kindLiteral // one of a few JSON texts (enum, const)
	kindAnyOf   // one of alternatives
)

// node is one compiled schema.
type node struct {
	kind kind
	// Objects: the named properties in the schema's order, which of them
	// are required, and the schema of other keys (nil: none allowed).
	props      []prop
	required   []bool
	additional *node
	// Arrays: the items' schema and the count's bounds (max -1: none).
	items              *node
	minItems, maxItems int
	// Strings: length bounds in bytes of the decoded text (max -1: none).
	minLen, maxLen int
	// Literals: the compact JSON texts allowed.
	literals []string
	// Alternatives.
	alts []*node
}

type prop struct {
	name string // the key as JSON text, quotes and escapes included
	node *node
}

var anyValue = &node{kind: kindAny}

// Schema is a compiled JSON schema, and the texts its documents are
// written between (Between).
type Schema struct {
	root           *node
	prefix, suffix string
}

// AnyObject is what json_object mode and Ollama's format "json" ask for: a
// JSON object, anything in it.
func AnyObject() *Schema {
	return &Schema{root: &node{kind: kindObject, additional: anyValue, maxItems: -1, maxLen: -1}}
}

// Compile reads a JSON schema. An unsupported keyword or a malformed schema
// is an error naming where it stands.
func Compile(schema json.RawMessage) (*Schema, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("structured: the schema is not a JSON object: %w", err)
	}
	c := &compiler{root: root, refs: map[string]*node{}}
	n, err := c.compile(schema, "#", 0)
	if err != nil {
		return nil, err
	}
	if w := widest(n); w > maxAlternatives {
		return nil, fmt.Errorf("structured: the schema's anyOf/oneOf/type lists open %d alternatives at one place, more than %d: the matcher follows each at once", w, maxAlternatives)
	}
	return &Schema{root: n}, nil
}

// maxAlternatives bounds how many readings of one value the matcher keeps
// at once (nested anyOf multiply), so a schema cannot make every step slow.
const maxAlternatives = 64

// starts is how many readings a value of n begins as: one, or the sum
// over an anyOf's alternatives; an anyOf that reaches itself before any
// byte counts as unbounded.
func starts(n *node, stack map[*node]bool) int {
	if n.kind != kindAnyOf {
		return 1
	}
	if stack[n] {
		return maxAlternatives + 1
	}
	stack[n] = true
	defer delete(stack, n)
	sum := 0
	for _, a := range n.alts {
		if sum += starts(a, stack); sum > maxAlternatives {
			break
		}
	}
	return sum
}

// widest is the most readings any value of the schema begins as.
func widest(root *node) int {
	seen := map[*node]bool{}
	var walk func(n *node) int
	walk = func(n *node) int {
		if seen[n] {
			return 0
		}
		seen[n] = true
		w := starts(n, map[*node]bool{})
		for _, m := range append(n.children(), n.alts...) {
			w = max(w, walk(m))
		}
		return w
	}
	return walk(root)
}

// children are the schemas of n's members: its properties' and items'.
func (n *node) children() []*node {
	var out []*node
	for _, p := range n.props {
		out = append(out, p.node)
	}
	if n.additional != nil {
		out = append(out, n.additional)
	}
	if n.items != nil {
		out = append(out, n.items)
	}
	return out
}

type compiler struct {
	root map[string]json.RawMessage
	refs map[string]*node
}

var annotations = []string{"title", "description", "default", "examples", "$schema", "$id", "$comment", "format", "$defs", "definitions", "strict", "readOnly", "writeOnly", "deprecated"}

func (c *compiler) compile(raw json.RawMessage, at string, depth int) (*node, error) {
	if depth > 64 {
		return nil, fmt.Errorf("structured: %s: the schema nests more than 64 levels", at)
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if !b {
			return nil, fmt.Errorf("structured: %s: the schema false allows nothing", at)
		}
		return anyValue, nil
	}
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("structured: %s: a schema must be an object or a boolean", at)
	}
	fail := func(format string, args ...any) (*node, error) {
		return nil, fmt.Errorf("structured: %s: %s", at, fmt.Sprintf(format, args...))
	}
	for k := range s {
		switch k {
		case "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength", "maxLength",
			"enum", "const", "anyOf", "oneOf", "allOf", "$ref":
		default:
			if !slices.Contains(annotations, k) {
				return fail("the keyword %q is not supported", k)
			}
		}
	}
	if ref, ok := s["$ref"]; ok {
		return c.ref(ref, at, depth)
	}
	if all, ok := s["allOf"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(all, &list) != nil || len(list) != 1 || len(s) > 1+countAnnotations(s) {
			return fail("allOf is supported with one member and nothing beside it")
		}
		return c.compile(list[0], at+"/allOf/0", depth+1)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key]; ok {
			var list []json.RawMessage
			if json.Unmarshal(alts, &list) != nil || len(list) == 0 {
				return fail("%s must be a non-empty list", key)
			}
			n := &node{kind: kindAnyOf}
			for i, a := range list {
				m, err := c.compile(a, fmt.Sprintf("%s/%s/%d", at, key, i), depth+1)
				if err != nil {
					return nil, err
				}
				n.alts = append(n.alts, m)
			}
			return n, nil
		}
	}
	if v, ok := s["const"]; ok {
		return literals(at, []json.RawMessage{v})
	}
	if v, ok := s["enum"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil || len(list) == 0 {
			return fail("enum must be a non-empty list")
		}
		return literals(at, list)
	}
	var types []string
	if t, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			types = []string{one}
		} else if json.Unmarshal(t, &types) != nil || len(types) == 0 {
			return fail("type must be a name or a list of names")
		}
	}
	if len(types) == 0 {
		// No type: what the keywords present imply, else anything.
		switch {
		case s["properties"] != nil || s["additionalProperties"] != nil || s["required"] != nil:
			types = []string{"object"}
		case s["items"] != nil:
			types = []string{"array"}
		default:
			return anyValue, nil
		}
	}
	var alts []*node
	for _, t := range types {
		n, err := c.typed(t, s, at, depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &node{kind: kindAnyOf, alts: alts}, nil
}

func countAnnotations(s map[string]json.RawMessage) int {
	n := 0
	for k := range s {
		if slices.Contains(annotations, k) {
			n++
		}
	}
	return n
}

func (c *compiler) typed(t string, s map[string]json.RawMessage, at string, depth int) (*node, error) {
	// bounds reads a count's lower and upper bound (0 and -1, none, when
	// absent); each must be a non-negative integer, the upper not below the
	// lower.
	bounds := func(minKey, maxKey string) (lo, hi int, err error) {
		read := func(key string, def int) (int, error) {
			v, ok := s[key]
			if !ok {
				return def, nil
			}
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 {
				return 0, fmt.Errorf("structured: %s: %s must be a non-negative integer", at, key)
			}
			return n, nil
		}
		if lo, err = read(minKey, 0); err != nil {
			return 0, 0, err
		}
		if hi, err = read(maxKey, -1); err != nil {
			return 0, 0, err
		}
		if hi >= 0 && hi < lo {
			return 0, 0, fmt.Errorf("structured: %s: %s %d is below %s %d", at, maxKey, hi, minKey, lo)
		}
		return lo, hi, nil
	}
	switch t {
	case "object":
		n := &node{kind: kindObject, additional: anyValue}
		if v, ok := s["additionalProperties"]; ok {
			var b bool
			if json.Unmarshal(v, &b) == nil {
				if !b {
					n.additional = nil
				}
			} else {
				m, err := c.compile(v, at+"/additionalProperties", depth+1)
				if err != nil {
					return nil, err
				}
				n.additional = m
			}
		}
		var required []string
		if v, ok := s["required"]; ok && json.Unmarshal(v, &required) != nil {
			return nil, fmt.Errorf("structured: %s: required must be a list of names", at)
		}
		if v, ok := s["properties"]; ok {
			// The properties in the schema's order: a model writes them so.
			dec := json.NewDecoder(bytes.NewReader(v))
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return nil, fmt.Errorf("structured: %s: properties must be an object", at)
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("structured: %s/properties: %w", at, err)
				}
				var sub json.RawMessage
				if err := dec.Decode(&sub); err != nil {
					return nil, fmt.Errorf("structured: %s/properties: %w", at, err)
				}
				name := k.(string)
				m, err := c.compile(sub, at+"/properties/"+name, depth+1)
				if err != nil {
					return nil, err
				}
				key, _ := json.Marshal(name)
				n.props = append(n.props, prop{string(key), m})
				n.required = append(n.required, slices.Contains(required, name))
			}
		}
		for _, r := range required {
			if !slices.ContainsFunc(n.props, func(p prop) bool { return p.name == quote(r) }) {
				return nil, fmt.Errorf("structured: %s: required property %q has no schema in properties", at, r)
			}
		}
		return n, nil
	case "array":
		n := &node{kind: kindArray, items: anyValue}
		if v, ok := s["items"]; ok {
			m, err := c.compile(v, at+"/items", depth+1)
			if err != nil {
				return nil, err
			}
			n.items = m
		}
		var err error
		n.minItems, n.maxItems, err = bounds("minItems", "maxItems")
		if err != nil {
			return nil, err
		}
		return n, nil
	case "string":
		n := &node{kind: kindString}
		var err error
		n.minLen, n.maxLen, err = bounds("minLength", "maxLength")
		if err != nil {
			return nil, err
		}
		return n, nil
	case "number":
		return &node{kind: kindNumber}, nil
	case "integer":
		return &node{kind: kindInteger}, nil
	case "boolean":
		return &node{kind: kindBool}, nil
	case "null":
		return &node{kind: kindNull}, nil
	}
	return nil, fmt.Errorf("structured: %s: unknown type %q", at, t)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ref resolves a local $ref ("#/$defs/name", "#/definitions/name", "#").
// A recursive schema refers to the node being compiled.
func (c *compiler) ref(raw json.RawMessage, at string, depth int) (*node, error) {
	var ref string
	if json.Unmarshal(raw, &ref) != nil {
		return nil, fmt.Errorf("structured: %s: $ref must be a string", at)
	}
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	var target json.RawMessage
	switch {
	case ref == "#":
		b, _ := json.Marshal(c.root)
		target = b
	case strings.HasPrefix(ref, "#/$defs/") || strings.HasPrefix(ref, "#/definitions/"):
		section, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/"), "/")
		var defs map[string]json.RawMessage
		if json.Unmarshal(c.root[section], &defs) != nil || defs[name] == nil {
			return nil, fmt.Errorf("structured: %s: $ref %q names no definition", at, ref)
		}
		target = defs[name]
	default:
		return nil, fmt.Errorf("structured: %s: $ref %q: only references into this schema's $defs or definitions are supported", at, ref)
	}
	// Placeholder first, so that a recursive reference finds it.
	n := &node{}
	c.refs[ref] = n
	m, err := c.compile(target, ref, depth+1)
	if err != nil {
		return nil, err
	}
	*n = *m
	return n, nil
}

// literals is an enum or const: each value as compact JSON text.
func literals(at string, values []json.RawMessage) (*node, error) {
	n := &node{kind: kindLiteral}
	for _, v := range values {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, fmt.Errorf("structured: %s: enum value %s: %w", at, v, err)
		}
		n.literals = append(n.literals, b.String())
	}
	return n, nil
}

// Call is the schema of a function call object {"name": name, argsKey:
// arguments}, the arguments a document of params (a JSON schema; empty for
// any object): what a forced tool call writes.
func Call(name, argsKey string, params json.RawMessage) (*Schema, error) {
	args := AnyObject().root
	if len(bytes.TrimSpace(params)) > 0 {
		p, err := Compile(params)
		if err != nil {
			return nil, fmt.Errorf("function %s's parameters: %w", name, err)
		}
		args = p.root
	}
	lit, _ := literals("#", []json.RawMessage{json.RawMessage(quote(name))})
	return &Schema{root: &node{kind: kindObject, props: []prop{{quote("name"), lit}, {quote(argsKey), args}}, required: []bool{true, true}}}, nil
}

// AnyOf is the schema of a document of any of ss.
func AnyOf(ss ...*Schema) *Schema {
	if len(ss) == 1 {
		return ss[0]
	}
	n := &node{kind: kindAnyOf}
	for _, s := range ss {
		n.alts = append(n.alts, s.root)
	}
	return &Schema{root: n}
}

// Between is the schema of s's documents written between prefix and
// suffix, as a tool-call syntax wraps its JSON ("<tool_call>\n" … "\n</tool_call>").
func (s *Schema) Between(prefix, suffix string) *Schema {
	return &Schema{root: s.root, prefix: prefix, suffix: suffix}
}
