package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// writeQuantizeModel writes a 2-layer llama-shaped F32 model (hidden 256,
// FFN 512, vocabulary 64, GQA 4) plus a 100-column matrix no quantized block
// divides, and returns its path.
func writeQuantizeModel(t *testing.T, dir string) string {
	t.Helper()
	type tensor struct {
		name  string
		shape []uint64
	}
	ts := []tensor{{"token_embd.weight", []uint64{256, 64}}}
	for l := range 2 {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor{p + "attn_norm.weight", []uint64{256}},
			tensor{p + "attn_q.weight", []uint64{256, 256}},
			tensor{p + "attn_k.weight", []uint64{256, 64}},
			tensor{p + "attn_v.weight", []uint64{256, 64}},
			tensor{p + "attn_output.weight", []uint64{256, 256}},
			tensor{p + "ffn_norm.weight", []uint64{256}},
			tensor{p + "ffn_gate.weight", []uint64{256, 512}},
			tensor{p + "ffn_up.weight", []uint64{256, 512}},
			tensor{p + "ffn_down.weight", []uint64{512, 256}},
		)
	}
	ts = append(ts,
		tensor{"blk.1.odd.weight", []uint64{100, 4}},
		tensor{"output_norm.weight", []uint64{256}},
		tensor{"output.weight", []uint64{256, 64}},
	)

	path := filepath.Join(dir, "model.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := gguf.NewWriter(fh)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.SetString("general.architecture", "llama"))
	must(w.SetString("general.name", "quantize test"))
	must(w.SetUint32("llama.block_count", 2))
	must(w.SetUint32("llama.attention.head_count", 4))
	must(w.SetUint32("llama.attention.head_count_kv", 1))
	must(w.SetUint32("general.file_type", 0))
	for _, tt := range ts {
		must(w.AddTensor(tt.name, gguf.TypeF32, tt.shape))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tt := range ts {
		n := 1
		for _, d := range tt.shape {
			n *= int(d)
		}
		b := make([]byte, 0, 4*n)
		for range n {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(0.05*(2*rng.Float32()-1)))
		}
		must(w.WriteTensorBytes(tt.name, b))
	}
	must(w.Close())
	return path
}

func tensorTypes(t *testing.T, path string) map[string]gguf.Type {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[string]gguf.Type{}
	for _, ti := range f.Tensors() {
		types[ti.Name] = ti.Type
	}
	return types
}

func TestQuantizeCommand(t *testing.T) {
	dir := t.TempDir()
	in := writeQuantizeModel(t, dir)
	out := filepath.Join(dir, "q4km.gguf")
	stdout, stderr, err := execute(newQuantizeCmd(), in, out, "q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	// Not a terminal: one line per tensor on stderr, the fallback explained.
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 22 {
		t.Errorf("%d progress lines, want 22:\n%s", len(lines), stderr)
	}
	if !strings.Contains(stderr, "blk.1.odd.weight") || !strings.Contains(stderr, "fallback: rows of 100 values") {
		t.Errorf("no fallback line for blk.1.odd.weight:\n%s", stderr)
	}
	if !strings.Contains(stdout, "wrote "+out+": Q4_K_M (file type MOSTLY_Q4_K_M)") {
		t.Errorf("summary:\n%s", stdout)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left behind", out)
	}
	types := tensorTypes(t, out)
	// 2 layers: use_more_bits picks layer 1 (i ≥ 7·2/8), not layer 0.
	for name, want := range map[string]gguf.Type{
		"token_embd.weight":      gguf.TypeQ4_K,
		"blk.0.attn_norm.weight": gguf.TypeF32,
		"blk.0.attn_v.weight":    gguf.TypeQ4_K,
		"blk.1.attn_v.weight":    gguf.TypeQ6_K,
		"blk.0.ffn_down.weight":  gguf.TypeQ4_K,
		"blk.1.ffn_down.weight":  gguf.TypeQ6_K,
		"blk.1.odd.weight":       gguf.TypeF16,
		"output_norm.weight":     gguf.TypeF32,
		"output.weight":          gguf.TypeQ6_K,
	} {
		if types[name] != want {
			t.Errorf("%s: %v, want %v", name, types[name], want)
		}
	}
}

func TestQuantizeJSONAndKeep(t *testing.T) {
	dir := t.TempDir()
	in := writeQuantizeModel(t, dir)
	out := filepath.Join(dir, "q8.gguf")
	stdout, _, err := execute(newQuantizeCmd(), in, out, "Q8_0", "--json", "--keep", `attn_q\.`, "--keep", "^output\\.weight$")
	if err != nil {
		t.Fatal(err)
	}
	var rep quantizeReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in:\n%s", err, stdout)
	}
	inSt, _ := os.Stat(in)
	outSt, _ := os.Stat(out)
	// 22 tensors: 5 norms, 2 attn_q and output kept, the rest converted.
	if rep.TensorCount != 22 || rep.Copied != 8 || rep.Converted != 14 || rep.Fallbacks != 1 {
		t.Errorf("counts %d tensors, %d copied, %d converted, %d fallbacks; want 22, 8, 14, 1",
			rep.TensorCount, rep.Copied, rep.Converted, rep.Fallbacks)
	}
	if rep.Types["Q8_0"] != 13 || rep.Types["F32"] != 8 || rep.Types["F16"] != 1 {
		t.Errorf("types %v, want Q8_0 13, F32 8, F16 1", rep.Types)
	}
	if rep.InputSize != inSt.Size() || rep.OutputSize != outSt.Size() || rep.FileTypeID != 7 || rep.FileType != "MOSTLY_Q8_0" {
		t.Errorf("report %+v; files %d → %d bytes", rep, inSt.Size(), outSt.Size())
	}
	if rep.BPWIn != 32 || rep.BPWOut <= 8 || rep.BPWOut >= 32 {
		t.Errorf("bits per weight %.2f → %.2f", rep.BPWIn, rep.BPWOut)
	}
	types := tensorTypes(t, out)
	for _, tt := range rep.Tensors {
		if types[tt.Name].String() != tt.To {
			t.Errorf("%s: report says %s, file has %v", tt.Name, tt.To, types[tt.Name])
		}
		kept := strings.Contains(tt.Name, "attn_q.") || tt.Name == "output.weight"
		if kept && (tt.To != "F32" || tt.Note != "kept by --keep") {
			t.Errorf("%s: %s (%q), want kept", tt.Name, tt.To, tt.Note)
		}
	}
}

func TestQuantizeDryRun(t *testing.T) {
	dir := t.TempDir()
	in := writeQuantizeModel(t, dir)
	out := filepath.Join(dir, "never.gguf")
	stdout, _, err := execute(newQuantizeCmd(), in, out, "Q4_0", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "would write "+out) || !strings.Contains(stdout, "output.weight") {
		t.Errorf("dry run printed:\n%s", stdout)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a dry run wrote the output")
	}
}

// TestQuantizeErrors checks that bad arguments and bad inputs are errors
// that name what is wrong, and that none leaves an output file.
func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	in := writeQuantizeModel(t, dir)
	raw, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.gguf")
	if err := os.WriteFile(truncated, raw[:len(raw)-1000], 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown type", []string{in, out, "Q9_K"}, []string{`unknown quantize type "Q9_K"`, "Q4_K_M"}},
		{"imatrix type", []string{in, out, "iq2_xxs"}, []string{"IQ2_XXS needs an importance matrix"}},
		{"grid type", []string{in, out, "IQ3_S"}, []string{"IQ3_S", "grids"}},
		{"in is out", []string{in, in, "Q4_0"}, []string{in, "is the input file"}},
		{"missing input", []string{missing, out, "Q4_0"}, []string{missing, "no such file"}},
		{"truncated input", []string{truncated, out, "Q4_0"}, []string{truncated, "truncated file"}},
		{"bad regex", []string{in, out, "Q4_0", "--keep", "attn_("}, []string{`--keep "attn_("`}},
		{"no such dir", []string{in, filepath.Join(dir, "nodir", "out.gguf"), "Q4_0"}, []string{filepath.Join(dir, "nodir", "out.gguf.tmp")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := execute(newQuantizeCmd(), c.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s exists after a failed run", out)
			}
		})
	}
	if after, _ := os.ReadFile(in); !bytes.Equal(after, raw) {
		t.Error("the input changed")
	}
}
