package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// inspectTestdata finds shared/testdata/ggml by walking up from the package
// directory (shared/ sits next to the checkout); it fails, not skips, when
// the directory is missing.
func inspectTestdata(t *testing.T) string {
	return sharedtest.Dir(t, "ggml")
}

func runInspect(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newInspectCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// inspectSidecar is the part of testdata/ggml/*.json the command reports.
type inspectSidecar struct {
	FileSize   int64  `json:"file_size"`
	Version    uint32 `json:"version"`
	Alignment  uint64 `json:"alignment"`
	DataOffset uint64 `json:"data_offset"`
	Metadata   []struct {
		Key       string `json:"key"`
		Type      string `json:"type"`
		ArrayType string `json:"array_type"`
		Count     int    `json:"count"`
		Value     any    `json:"value"`
	} `json:"metadata"`
	Tensors []struct {
		Name      string   `json:"name"`
		Type      string   `json:"type"`
		NE        []uint64 `json:"ne"`
		NElements uint64   `json:"n_elements"`
		Offset    uint64   `json:"offset"`
		NBytes    uint64   `json:"nbytes"`
	} `json:"tensors"`
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v in:\n%s", err, b)
	}
}

func TestInspectGGMLFiles(t *testing.T) {
	dir := inspectTestdata(t)
	for _, name := range []string{"all_kv_types_align64", "default_align", "no_tensors"} {
		path := filepath.Join(dir, name+".gguf")
		sideBytes, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var want inspectSidecar
		decodeJSON(t, sideBytes, &want)

		t.Run(name+"/text", func(t *testing.T) {
			out, err := runInspect(t, path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{
				"GGUF version  " + fmt.Sprint(want.Version),
				"alignment     " + fmt.Sprint(want.Alignment),
				fmt.Sprintf("metadata: %d keys", len(want.Metadata)),
				fmt.Sprintf("tensors: %d", len(want.Tensors)),
			} {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, kv := range want.Metadata {
				if !strings.Contains(out, "\n"+kv.Key+" ") {
					t.Errorf("output lacks key %s", kv.Key)
				}
			}
			for _, ti := range want.Tensors {
				if !strings.Contains(out, "\n"+ti.Name+" ") {
					t.Errorf("output lacks tensor %s", ti.Name)
				}
			}
		})

		t.Run(name+"/json", func(t *testing.T) {
			out, err := runInspect(t, path, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				inspectSidecar
				Architecture   string `json:"architecture"`
				ParameterCount uint64 `json:"parameter_count"`
				Tensors        []struct {
					Name      string   `json:"name"`
					Type      string   `json:"type"`
					Shape     []uint64 `json:"shape"`
					NElements uint64   `json:"n_elements"`
					Offset    uint64   `json:"offset"`
					NBytes    uint64   `json:"nbytes"`
				} `json:"tensors"`
			}
			decodeJSON(t, []byte(out), &got)
			if got.FileSize != want.FileSize || got.Version != want.Version || got.Alignment != want.Alignment || got.DataOffset != want.DataOffset {
				t.Errorf("header %+v, ggml %+v", got.inspectSidecar, want)
			}
			if len(got.Metadata) != len(want.Metadata) {
				t.Fatalf("%d keys, ggml %d", len(got.Metadata), len(want.Metadata))
			}
			for i, w := range want.Metadata {
				g := got.Metadata[i]
				if g.Key != w.Key || g.Type != w.Type || g.ArrayType != w.ArrayType || g.Count != w.Count {
					t.Errorf("key %d: %s %s [%s × %d], ggml %s %s [%s × %d]", i, g.Key, g.Type, g.ArrayType, g.Count, w.Key, w.Type, w.ArrayType, w.Count)
				}
				// Integers, bools and strings print exactly; floats are the
				// shortest form, which the sidecar's %.9g/%.17g need not be.
				if strings.HasPrefix(w.Type, "FLOAT") || w.ArrayType == "FLOAT32" || w.ArrayType == "FLOAT64" {
					continue
				}
				if fmt.Sprint(g.Value) != fmt.Sprint(w.Value) {
					t.Errorf("%s = %v, ggml %v", w.Key, g.Value, w.Value)
				}
			}
			var params uint64
			if len(got.Tensors) != len(want.Tensors) {
				t.Fatalf("%d tensors, ggml %d", len(got.Tensors), len(want.Tensors))
			}
			for i, w := range want.Tensors {
				g := got.Tensors[i]
				if g.Name != w.Name || g.Type != w.Type || fmt.Sprint(g.Shape) != fmt.Sprint(w.NE) ||
					g.NElements != w.NElements || g.Offset != w.Offset || g.NBytes != w.NBytes {
					t.Errorf("tensor %d: %+v, ggml %+v", i, g, w)
				}
				params += w.NElements
			}
			if got.ParameterCount != params {
				t.Errorf("parameter_count %d, want %d", got.ParameterCount, params)
			}
		})
	}
}

// TestInspectSummarizesLongArrays checks that a vocabulary-sized array shows
// its length and first entries only, in both forms, and that JSON carries
// floats exactly and non-finite ones as strings.
func TestInspectSummarizesLongArrays(t *testing.T) {
	tokens := make([]string, 150000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%d", i)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter(fh)
	for _, err := range []error{
		w.SetString("general.architecture", "llama"),
		w.SetUint32("general.file_type", 15),
		w.SetStrings("tokenizer.ggml.tokens", tokens),
		w.SetFloat32s("odd.floats", []float32{0.1, float32(math.Inf(1)), float32(math.Inf(-1))}),
		w.SetString("tokenizer.chat_template", strings.Repeat("{{ x }}", 100)),
		w.Set("odd.nested", gguf.ArrayOf([]gguf.Value{gguf.ArrayOf([]int32{1, 2})})),
		w.AddTensor("w", gguf.TypeQ4_K, []uint64{256, 4}),
		w.WriteTensorBytes("w", make([]byte, 4*144)),
		w.Close(),
		fh.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	out, err := runInspect(t, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`[STRING × 150000]  "tok0", "tok1", "tok2", "tok3", "tok4", "tok5", "tok6", "tok7", … (149992 more)`,
		"file type     MOSTLY_Q4_K_M (15)",
		"parameters    1.02K (1024)",
		"(700 bytes)",
		"[INT32 × 2: 1, 2]",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "tok8") || len(out) > 4000 {
		t.Errorf("output is %d bytes and shows more than 8 tokens", len(out))
	}

	out, err = runInspect(t, "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 8000 {
		t.Errorf("JSON is %d bytes: the vocabulary was not summarized", len(out))
	}
	var rep inspectReport
	decodeJSON(t, []byte(out), &rep)
	if rep.FileType != "MOSTLY_Q4_K_M" || rep.ParameterCount != 1024 {
		t.Errorf("file type %q, %d parameters", rep.FileType, rep.ParameterCount)
	}
	byKey := map[string]inspectKV{}
	for _, kv := range rep.Metadata {
		byKey[kv.Key] = kv
	}
	tok := byKey["tokenizer.ggml.tokens"]
	if *tok.Count != 150000 || !tok.Truncated || len(tok.Value.([]any)) != 8 || tok.Value.([]any)[7] != "tok7" {
		t.Errorf("tokens: count %d truncated %v value %v", *tok.Count, tok.Truncated, tok.Value)
	}
	if got := fmt.Sprint(byKey["odd.floats"].Value); got != "[0.1 +Inf -Inf]" {
		t.Errorf("odd.floats = %s", got)
	}
	if got := byKey["tokenizer.chat_template"].Value; got != strings.Repeat("{{ x }}", 100) {
		t.Errorf("the JSON chat template was cut: %v", got)
	}
}

func TestInspectRejectsBadFiles(t *testing.T) {
	dir := inspectTestdata(t)
	_, err := runInspect(t, filepath.Join(dir, "bad_naive_align64.gguf"))
	if err == nil || !strings.Contains(err.Error(), `tensor "blk.0.ffn_down.weight" has offset 96, expected 128`) {
		t.Errorf("bad_naive_align64.gguf: %v", err)
	}
	if _, err := runInspect(t, filepath.Join(dir, "input.f32")); err == nil || !strings.Contains(err.Error(), "not a GGUF file") {
		t.Errorf("input.f32: %v", err)
	}
	if _, err := runInspect(t); err == nil {
		t.Error("no argument: no error")
	}
}
