package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/synth"
)

// isolateStores points every store hearth models reads at folders under
// home, so that no test reads the developer's own models.
func isolateStores(t *testing.T, home string) {
	t.Helper()
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home) // os.UserHomeDir on Windows
	for _, v := range []string{"OLLAMA_MODELS", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"} {
		t.Setenv(v, "")
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestModelsCommand(t *testing.T) {
	home := t.TempDir()
	isolateStores(t, home)
	tiny := tinyModel(t, "tiny-llama")
	data, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}

	// An Ollama store in $OLLAMA_MODELS with one model.
	ollama := filepath.Join(home, "ollama")
	t.Setenv("OLLAMA_MODELS", ollama)
	digest := sha256.Sum256(data)
	hexDigest := hex.EncodeToString(digest[:])
	copyFile(t, tiny, filepath.Join(ollama, "blobs", "sha256-"+hexDigest))
	manifest := fmt.Sprintf(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%d}]}`, hexDigest, len(data))
	manifestPath := filepath.Join(ollama, "manifests", "registry.ollama.ai", "library", "tiny", "latest")
	if err := os.MkdirAll(filepath.Dir(manifestPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifestPath, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// LM Studio's folder in the home folder, and a folder of the user's with
	// a model and a file that is not one.
	copyFile(t, tiny, filepath.Join(home, ".lmstudio", "models", "pub", "repo", "tiny-q8_0.gguf"))
	folder := filepath.Join(home, "mine")
	copyFile(t, tiny, filepath.Join(folder, "mine.gguf"))
	if err := os.WriteFile(filepath.Join(folder, "notes.gguf"), []byte("not weights"), 0o644); err != nil {
		t.Fatal(err)
	}

	rep := modelsJSON(t, "--folder", folder)
	if rep.Roots.Ollama != ollama || !slices.Equal(rep.Roots.Folders, []string{folder}) ||
		rep.Roots.HuggingFace != filepath.Join(home, ".cache", "huggingface", "hub") {
		t.Errorf("roots %+v", rep.Roots)
	}
	var names []string
	byName := map[string]modelsEntry{}
	for _, m := range rep.Models {
		names = append(names, m.Name)
		byName[m.Name] = m
	}
	if want := []string{"mine", "notes", "pub/repo/tiny-q8_0.gguf", "tiny:latest"}; !slices.Equal(names, want) {
		t.Fatalf("models %v, want %v", names, want)
	}
	for _, name := range []string{"mine", "pub/repo/tiny-q8_0.gguf", "tiny:latest"} {
		m := byName[name]
		if m.Error != "" || m.Arch != "llama" || m.Quant != "Q8_0" || m.Params <= 0 || m.Context != 2048 || m.Layers != 2 ||
			m.Size != int64(len(data)) || m.Memory == nil || m.Memory.Context != 2048 || m.Memory.Batch != 512 ||
			m.Memory.Total != m.Memory.Weights+m.Memory.KV+m.Memory.Activations || m.Memory.Weights <= 0 {
			t.Errorf("%s: %+v (memory %+v)", name, m, m.Memory)
		}
	}
	if m := byName["tiny:latest"]; m.Source != "ollama" || m.Path != filepath.Join(ollama, "blobs", "sha256-"+hexDigest) {
		t.Errorf("tiny:latest: source %s, path %s", m.Source, m.Path)
	}
	if m := byName["notes"]; !strings.Contains(m.Error, "not a GGUF file") || m.Arch != "" || m.Memory != nil {
		t.Errorf("notes: %+v", m)
	}

	out, _, err := runModelCmd(t, "", "models", "--folder", folder)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"NAME", "MEMORY", "tiny:latest", "ollama", "lmstudio", "Q8_0", "2048", "1 cannot be used", "notes: ", "not a GGUF file"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}

	// -m takes a name from the list, with Ollama's implicit tag.
	out, log, err := runModelCmd(t, "", "logits", "-m", "tiny", "--tokens", "1,2", "--backend", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(out, `"n_vocab"`) {
		t.Errorf("logits by name: %s", out)
	}
	_, _, err = runModelCmd(t, "", "logits", "-m", "tiny:7b", "--tokens", "1", "--backend", "cpu")
	if err == nil || !strings.Contains(err.Error(), "unknown model") || !strings.Contains(err.Error(), "tiny:latest") {
		t.Errorf("unknown name: %v", err)
	}
}

// TestModelsCommandShowsVision: a model with a vision projector beside it
// is marked in the table and names the projector in --json; the projector
// is not listed as a model.
func TestModelsCommandShowsVision(t *testing.T) {
	home := t.TempDir()
	isolateStores(t, home)
	folder := filepath.Join(home, "mine")
	copyFile(t, tinyModel(t, "tiny-gemma3"), filepath.Join(folder, "gemma.gguf"))
	copyFile(t, tinyModel(t, "tiny-llama"), filepath.Join(folder, "llama", "llama.gguf"))
	p, ok := synth.ProjectorPresetByName("tiny-gemma3-vision")
	if !ok {
		t.Fatal("no projector preset tiny-gemma3-vision")
	}
	proj := filepath.Join(folder, "mmproj-gemma-f16.gguf")
	if err := synth.WriteProjector(proj, p, 1); err != nil {
		t.Fatal(err)
	}

	// The raw output too: an entry without a projector writes none.
	out, _, err := runModelCmd(t, "", "models", "--json", "--folder", folder)
	if err != nil {
		t.Fatal(err)
	}
	var rep modelsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	projectors := map[string]string{}
	for _, m := range rep.Models {
		projectors[m.Name] = m.Projector
	}
	if want := map[string]string{"gemma": proj, "llama": ""}; !maps.Equal(projectors, want) {
		t.Errorf("models and their projectors %v, want %v", projectors, want)
	}
	if strings.Contains(out, `"projector": ""`) {
		t.Errorf("an empty projector is written:\n%s", out)
	}

	out, _, err = runModelCmd(t, "", "models", "--folder", folder)
	if err != nil {
		t.Fatal(err)
	}
	// The table's columns line up, and SIZE has a space in it: the VISION
	// column is where its heading is.
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, " "); ok {
			rows[name] = line
		}
	}
	col := strings.Index(rows["NAME"], "VISION")
	if col < 0 {
		t.Fatalf("no VISION column:\n%s", out)
	}
	for name, want := range map[string]string{"gemma": "yes ", "llama": "- "} {
		if row := rows[name]; !strings.HasPrefix(row[min(col, len(row)):], want) {
			t.Errorf("%s: VISION is not %q:\n%s", name, want, out)
		}
	}
	if strings.Contains(out, "mmproj") {
		t.Errorf("the projector is listed:\n%s", out)
	}
}

func TestModelsCommandFindsNothing(t *testing.T) {
	home := t.TempDir()
	isolateStores(t, home)
	out, _, err := runModelCmd(t, "", "models")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "no models found") || !strings.Contains(out, filepath.Join(home, ".ollama", "models")) {
		t.Errorf("output:\n%s", out)
	}
	out, _, err = runModelCmd(t, "", "models", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &rep); err != nil || string(rep["models"]) != "[]" {
		t.Errorf("--json with nothing found: %v\n%s", err, out)
	}
}

// TestModelsShareTheStudiosLibrary: a model where the studio's "Make and
// load" writes it (Hearth's models folder), an adapter where training
// writes it (Hearth's adapters folder) and a folder added in the studio are
// all in hearth models, and -m and --lora take their names. The model was
// "unknown" to -m, and the adapter listed as a broken model.
func TestModelsShareTheStudiosLibrary(t *testing.T) {
	home := t.TempDir()
	isolateStores(t, home)
	base, lora := mergeFixture(t)
	hearth := filepath.Join(home, ".config", "hearth")
	copyFile(t, base, filepath.Join(hearth, "models", "tiny-qwen2-F32.gguf"))
	copyFile(t, lora, filepath.Join(hearth, "adapters", "tuned.gguf"))
	added := filepath.Join(home, "added")
	copyFile(t, base, filepath.Join(added, "added-model.gguf"))
	if err := os.WriteFile(filepath.Join(hearth, "settings.json"), []byte(`{"folders":[`+strconvQuote(added)+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, _, err := runModelCmd(t, "", "models")
	if err != nil {
		t.Fatal(err)
	}
	models, adapters, ok := strings.Cut(out, "Adapters")
	if !ok {
		t.Fatalf("no Adapters section:\n%s", out)
	}
	for _, s := range []string{"tiny-qwen2-F32", "hearth", "added-model"} {
		if !strings.Contains(models, s) {
			t.Errorf("models lack %q:\n%s", s, out)
		}
	}
	if strings.Contains(models, "tuned") || strings.Contains(out, "cannot be used") || strings.Contains(out, "embedding_length") {
		t.Errorf("the adapter is listed as a model:\n%s", out)
	}
	if !strings.Contains(adapters, "tuned") || !strings.Contains(adapters, "qwen2") || !strings.Contains(adapters, "tiny-qwen2-F32") {
		t.Errorf("adapters lack tuned, for qwen2, fitting tiny-qwen2-F32:\n%s", adapters)
	}

	rep := modelsJSON(t)
	if len(rep.Adapters) != 1 || rep.Adapters[0].Name != "tuned" || rep.Adapters[0].Arch != "qwen2" || rep.Adapters[0].Rank != 2 ||
		rep.Adapters[0].Format != "gguf" || !slices.Contains(rep.Adapters[0].Bases, "tiny-qwen2-F32") || rep.Adapters[0].Error != "" {
		t.Errorf("adapters %+v", rep.Adapters)
	}
	if !slices.Equal(rep.Roots.Hearth, []string{filepath.Join(hearth, "models"), filepath.Join(hearth, "adapters")}) || !slices.Contains(rep.Roots.Folders, added) {
		t.Errorf("roots %+v", rep.Roots)
	}

	logitsOf := func(args ...string) [][]float32 {
		t.Helper()
		stdout, log, err := runModelCmd(t, "", append([]string{"logits", "--backend", "cpu", "--tokens", "1,5,9"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, log)
		}
		var r logitsReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r.Logits
	}
	// The same file and adapter by name and by path are the same run, so
	// the logits are equal to the bit; the adapter moves them.
	plain := logitsOf("-m", "tiny-qwen2-F32")
	byName := logitsOf("-m", "tiny-qwen2-F32", "--lora", "tuned:0.5")
	byPath := logitsOf("-m", base, "--lora", lora+":0.5")
	moved := false
	for i := range byPath {
		if !slices.Equal(byName[i], byPath[i]) {
			t.Fatalf("row %d: --lora tuned and --lora %s give other logits", i, lora)
		}
		moved = moved || !slices.Equal(plain[i], byName[i])
	}
	if !moved {
		t.Error("--lora tuned did not change the logits")
	}

	_, _, err = runModelCmd(t, "", "logits", "--backend", "cpu", "--tokens", "1", "-m", "tiny-qwen2-F32", "--lora", "tund")
	if err == nil || !strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "tuned") {
		t.Errorf("--lora with an unknown name: %v, want it to list tuned", err)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// modelsJSON runs hearth models --json with args and reads its report.
func modelsJSON(t *testing.T, args ...string) modelsReport {
	t.Helper()
	out, _, err := runModelCmd(t, "", append([]string{"models", "--json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep modelsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	return rep
}
