package structured

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// person is a schema with every kind of node: properties in order,
// required and optional, nested objects, bounded arrays and strings,
// enums, integers, numbers, booleans, null, a type list, anyOf and $ref.
const person = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "member": {"type": "boolean"},
    "color": {"enum": ["red", "green", 12, null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
    "nick": {"type": ["string", "null"], "maxLength": 6},
    "pet": {"anyOf": [{"$ref": "#/$defs/pet"}, {"type": "null"}]},
    "kind": {"const": "person"}
  },
  "required": ["name", "age", "tags", "kind"],
  "additionalProperties": false,
  "$defs": {"pet": {"type": "object", "properties": {"species": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"}}, "required": ["species"], "additionalProperties": false}}
}`

func mustCompile(t *testing.T, s string) *Schema {
	t.Helper()
	c, err := Compile(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// accepts feeds doc byte by byte and reports whether the matcher took
// every byte and ends whole.
func accepts(s *Schema, doc string) bool {
	m := NewMatcher(s)
	return m.Feed([]byte(doc)) && m.Done()
}

func TestMatcherAcceptsAndRefuses(t *testing.T) {
	p := mustCompile(t, person)
	for _, doc := range []string{
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person"}`,
		`{"name": "Ann", "age": -3, "height": 1.75e0, "member": true, "color": 12, "tags": ["a", "bb", ""], "nick": null, "pet": {"species": "cat", "legs": 4}, "kind": "person"}`,
		`{"kind":"person","tags":["x"],"age":0,"name":"\u00e9\"q"}`,
		"{\n  \"name\": \"A\",\n  \"age\": 1,\n  \"tags\": [\"t\"],\n  \"pet\": null,\n  \"color\": null,\n  \"kind\": \"person\"\n}",
	} {
		if !accepts(p, doc) {
			t.Errorf("refused %s", doc)
		}
	}
	for _, doc := range []string{
		`{"name":"Ann","age":41,"tags":["a"]}`,                                  // kind missing
		`{"name":"","age":41,"tags":["a"],"kind":"person"}`,                     // minLength
		`{"name":"Ann","age":4.1,"tags":["a"],"kind":"person"}`,                 // integer
		`{"name":"Ann","age":41,"tags":[],"kind":"person"}`,                     // minItems
		`{"name":"Ann","age":41,"tags":["a","b","c","d"],"kind":"person"}`,      // maxItems
		`{"name":"Ann","age":41,"tags":["abcdef"],"kind":"person"}`,             // items' maxLength
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person","x":1}`,            // additionalProperties
		`{"name":"Ann","name":"Bo","age":41,"tags":["a"],"kind":"person"}`,      // a key twice
		`{"name":"Ann","age":041,"tags":["a"],"kind":"person"}`,                 // a leading zero
		`{"name":"Ann","age":41,"tags":["a"],"kind":"persons"}`,                 // const
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person","color":"blue"}`,   // enum
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person","pet":{"legs":4}}`, // $ref's required
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person"} `,                 // after the end
		`{"name":"Ann","age":41,"tags":["a"],"kind":"person"`,                   // not closed
		"{\"name\":\"Ann\n\",\"age\":41,\"tags\":[\"a\"],\"kind\":\"person\"}",  // a raw control byte
		`{"name":"Ann",                 "age":41,"tags":["a"],"kind":"person"}`, // more space than bounded
		`{"name":"Ann","age":12345678901234567,"tags":["a"],"kind":"person"}`,   // more digits than bounded
	} {
		if accepts(p, doc) {
			t.Errorf("accepted %s", doc)
		}
	}

	anyObj := AnyObject()
	for _, doc := range []string{`{}`, `{"a":[1,{"b":null}],"c":"d"}`, `{"x":-0.5e+3,"y":[true,false]}`} {
		if !accepts(anyObj, doc) {
			t.Errorf("json_object refused %s", doc)
		}
	}
	for _, doc := range []string{`[]`, `"s"`, `{"a":}`, `{a:1}`, `{"a":tru}`} {
		if accepts(anyObj, doc) {
			t.Errorf("json_object accepted %s", doc)
		}
	}
	// A top-level number ends where the text does, or goes on.
	num := mustCompile(t, `{"type":"number"}`)
	m := NewMatcher(num)
	if !m.Feed([]byte("12")) || !m.Done() || !m.More() || !m.Feed([]byte(".5")) || !m.Done() {
		t.Error("a top-level number")
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, s := range []string{
		`[]`, `false`, `{"type":"string","pattern":"^a"}`, `{"type":"object","required":["a"]}`,
		`{"type":"thing"}`, `{"$ref":"http://example.com/s"}`, `{"$ref":"#/$defs/none"}`,
		`{"type":"string","minLength":3,"maxLength":2}`, `{"allOf":[{"type":"string"},{"maxLength":2}]}`,
		`{"type":"array","minItems":-1}`,
		// Nested anyOf multiply: 9 × 9 readings of one value at once.
		`{"anyOf":[` + strings.Repeat(`{"anyOf":[`+strings.Repeat(`{"type":"integer"},`, 8)+`{"type":"null"}]},`, 8) + `{"type":"null"}]}`,
		// An anyOf that reaches itself before any byte.
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`,
	} {
		if _, err := Compile(json.RawMessage(s)); err == nil {
			t.Errorf("compiled %s", s)
		} else if !strings.HasPrefix(err.Error(), "structured: ") {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// vocab is a toy vocabulary for random generations: single bytes, JSON
// punctuation runs, words, and pieces that no JSON continues.
var vocab = func() [][]byte {
	var v [][]byte
	for c := 0x20; c < 0x7f; c++ {
		v = append(v, []byte{byte(c)})
	}
	for _, s := range []string{"\n", "{\"", "\":", "\",\"", "\"}", "[\"", "\"]", ", ", "true", "false", "null", "name", "age", "tags",
		"kind", "person", "pet", "species", "cat", "dog", "12", "-1", "0.", "e+", "\":\"", "\\u00e9", "é", "\x01", "}}", "]}"} {
		v = append(v, []byte(s))
	}
	return v
}()

type toyTokens struct{}

func (toyTokens) Piece(id int32) []byte {
	if int(id) >= len(vocab) {
		return nil // the stop token writes nothing
	}
	return vocab[id]
}
func (toyTokens) Size() int { return len(vocab) + 1 }

// TestRandomGenerationsValidate samples 100 documents per schema with
// random logits through the Constraint, as a random-weight model would
// write them, and checks each with an independent JSON Schema validator
// (santhosh-tekuri/jsonschema): the constraint must make every one valid.
func TestRandomGenerationsValidate(t *testing.T) {
	stop := int32(len(vocab))
	schemas := map[string]string{
		"person": person,
		"list":   `{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},"required":["id"],"additionalProperties":false},"maxItems":4}`,
		"enum":   `{"enum":["a","ab",1,12,[1],{"k":"v"}]}`,
		"anyOf":  `{"anyOf":[{"type":"integer"},{"type":"string","maxLength":4},{"type":"object","properties":{"z":{"type":"null"}},"additionalProperties":false}]}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for name, src := range schemas {
		s := mustCompile(t, src)
		c := jsonschema.NewCompiler()
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("mem://"+name, doc); err != nil {
			t.Fatal(err)
		}
		validator, err := c.Compile("mem://" + name)
		if err != nil {
			t.Fatal(err)
		}
		for g := range 100 {
			k := NewConstraint(s, toyTokens{}, []int32{stop})
			var out []byte
			for step := 0; ; step++ {
				if step > 400 {
					t.Fatalf("%s #%d: no end after 400 tokens: %s", name, g, out)
				}
				logits := make([]float32, len(vocab)+1)
				for i := range logits {
					logits[i] = float32(rng.NormFloat64())
				}
				keep := []int{1, 5, 0}[g%3] // greedy, top-k 5, the whole vocabulary
				if err := k.Limit(logits, keep); err != nil {
					t.Fatalf("%s #%d after %q: %v", name, g, out, err)
				}
				// Draw among what Limit left, as a sampler would.
				var ids []int32
				for i, v := range logits {
					if v > float32(-1e30) {
						ids = append(ids, int32(i))
					}
				}
				id := ids[rng.IntN(len(ids))]
				if err := k.Accept(id); err != nil {
					t.Fatalf("%s #%d: %v", name, g, err)
				}
				if id == stop {
					break
				}
				out = append(out, vocab[id]...)
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(out)))
			if err != nil {
				t.Fatalf("%s #%d: %q does not parse: %v", name, g, out, err)
			}
			if err := validator.Validate(v); err != nil {
				t.Errorf("%s #%d: %s does not validate: %v", name, g, out, err)
			}
		}
	}
}
