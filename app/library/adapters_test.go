package library

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/gguf"
)

// loraFor is a LoRA adapter of rank 2 on two of the model's weights, with
// the shapes the model at path has; grow widens the first one's input, so
// that the adapter is of the model's architecture but fits no model of it.
func loraFor(t *testing.T, path string, grow int) *adapter.Adapter {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &adapter.Adapter{Arch: f.Architecture(), Alpha: 4, Pairs: map[string]*adapter.Pair{}}
	for i, name := range []string{"blk.0.attn_q.weight", "blk.0.attn_v.weight"} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s has no %s", path, name)
		}
		cols, rows := int(ti.Shape[0]), int(ti.Shape[1])
		if i == 0 {
			cols += grow
		}
		const rank = 2
		a.Pairs[name] = &adapter.Pair{Rank: rank, Rows: rows, Cols: cols,
			A: make([]float32, rank*cols), B: make([]float32, rows*rank)}
	}
	return a
}

// adapterFolder is a user folder holding the two tiny models, a GGUF
// adapter for each model's shapes as Hearth's training writes it, a GGUF
// adapter of llama's architecture in shapes no model has, and a PEFT
// folder for tiny-qwen2.
func adapterFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	place(t, tinyLlama.path, filepath.Join(dir, "tiny-llama.gguf"))
	place(t, tinyQwen.path, filepath.Join(dir, "tiny-qwen2.gguf"))
	mkdir(t, filepath.Join(dir, "adapters"))
	if err := adapter.WriteGGUF(filepath.Join(dir, "adapters", "llama-style.gguf"), loraFor(t, tinyLlama.path, 0)); err != nil {
		t.Fatal(err)
	}
	if err := adapter.WriteGGUF(filepath.Join(dir, "adapters", "llama-misfit.gguf"), loraFor(t, tinyLlama.path, 3)); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(tinyQwen.path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	peft := loraFor(t, tinyQwen.path, 0)
	peft.BaseModel = "someone/tiny-qwen2"
	if err := adapter.WritePEFT(filepath.Join(dir, "qwen-peft"), peft, &m.Config); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestScanListsAdaptersApart is the scan of a folder of models and LoRA
// adapters: the adapters are not models (they were listed as broken ones,
// "key llama.embedding_length: missing"), and each names the models it
// fits.
func TestScanListsAdaptersApart(t *testing.T) {
	dir := adapterFolder(t)
	models, adapters := ScanAll(Roots{Folders: []string{dir}})

	var names []string
	for _, e := range models {
		names = append(names, e.Name)
		if e.Err != "" || e.Adapter != nil {
			t.Errorf("model %s: error %q, adapter %+v", e.Name, e.Err, e.Adapter)
		}
	}
	if want := []string{"tiny-llama", "tiny-qwen2"}; !slices.Equal(names, want) {
		t.Fatalf("models %v, want %v", names, want)
	}
	if got := Scan(Roots{Folders: []string{dir}}); len(got) != len(models) {
		t.Errorf("Scan lists %d entries, ScanAll %d models", len(got), len(models))
	}

	type want struct {
		name, format, arch, base string
		rank, targets            int
		bases                    []string
	}
	wants := []want{
		{"llama-misfit", AdapterGGUF, "llama", "", 2, 2, nil},
		{"llama-style", AdapterGGUF, "llama", "", 2, 2, []string{"tiny-llama"}},
		{"qwen-peft", AdapterPEFT, "", "someone/tiny-qwen2", 2, 0, []string{"tiny-qwen2"}},
	}
	if len(adapters) != len(wants) {
		t.Fatalf("%d adapters, want %d: %+v", len(adapters), len(wants), adapters)
	}
	for i, w := range wants {
		e := adapters[i]
		a := e.Adapter
		if e.Name != w.name || e.Err != "" || e.Info != nil || a == nil {
			t.Errorf("adapter %d: %s, error %q, info %+v, adapter %+v; want %s", i, e.Name, e.Err, e.Info, a, w.name)
			continue
		}
		if a.Format != w.format || a.Arch != w.arch || a.BaseModel != w.base || a.Rank != w.rank || a.Alpha != 4 || a.Targets != w.targets || !slices.Equal(a.Bases, w.bases) {
			t.Errorf("adapter %s: %+v, want %+v", e.Name, *a, w)
		}
		if e.Size <= 0 {
			t.Errorf("adapter %s: size %d", e.Name, e.Size)
		}
	}
}

// TestHearthFoldersAreScanned: what the studio makes and training writes,
// in Hearth's own folders, is in the library every command uses, under its
// file's name and the source "hearth"; a missing Hearth folder is not an
// error, as a user folder would be.
func TestHearthFoldersAreScanned(t *testing.T) {
	dir := t.TempDir()
	folders := HearthFolders(dir)
	place(t, tinyLlama.path, filepath.Join(folders[0], "tiny-llama-Q4_K_M.gguf"))
	models, adapters := ScanAll(Roots{Hearth: folders})
	if len(models) != 1 || models[0].Name != "tiny-llama-Q4_K_M" || models[0].Source != SourceHearth || models[0].Err != "" {
		t.Fatalf("models %+v, want tiny-llama-Q4_K_M from Hearth's folder", models)
	}
	if len(adapters) != 0 {
		t.Errorf("adapters %+v in a missing adapters folder", adapters)
	}
	if _, err := Resolve(Roots{Hearth: folders}, "tiny-llama-Q4_K_M"); err != nil {
		t.Error(err)
	}
	mkdir(t, folders[1])
	if err := adapter.WriteGGUF(filepath.Join(folders[1], "tuned.gguf"), loraFor(t, tinyLlama.path, 0)); err != nil {
		t.Fatal(err)
	}
	_, adapters = ScanAll(Roots{Hearth: folders})
	if len(adapters) != 1 || adapters[0].Name != "tuned" || !slices.Equal(adapters[0].Adapter.Bases, []string{"tiny-llama-Q4_K_M"}) {
		t.Errorf("adapters %+v, want tuned for tiny-llama-Q4_K_M", adapters)
	}
}

func TestResolveAdapter(t *testing.T) {
	dir := adapterFolder(t)
	lib := New(Roots{Folders: []string{dir}})

	e, err := lib.ResolveAdapter("llama-style")
	if err != nil || e.Path != filepath.Join(dir, "adapters", "llama-style.gguf") {
		t.Errorf("llama-style: %+v, %v", e, err)
	}
	e, err = lib.ResolveAdapter("qwen-peft")
	if err != nil || e.Path != filepath.Join(dir, "qwen-peft") {
		t.Errorf("qwen-peft: %+v, %v", e, err)
	}
	// A path is taken as it is, as --lora always took it.
	path := filepath.Join(dir, "adapters", "llama-style.gguf")
	if e, err := lib.ResolveAdapter(path); err != nil || e.Path != path {
		t.Errorf("%s: %+v, %v", path, e, err)
	}
	if _, err := lib.ResolveAdapter("tiny-llama"); err == nil || !strings.Contains(err.Error(), "is a model, not a LoRA adapter") {
		t.Errorf("a model's name: %v", err)
	}
	_, err = lib.ResolveAdapter("llama-sty")
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "llama-style") {
		t.Errorf("an unknown name: %v, want it to list llama-style", err)
	}
	// An adapter's name given for a model says what it is.
	if _, err := lib.Resolve("llama-style"); !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), "--lora llama-style") {
		t.Errorf("an adapter as a model: %v", err)
	}
	if _, err := Describe(path); !errors.Is(err, ErrAdapter) {
		t.Errorf("Describe of an adapter: %v, want ErrAdapter", err)
	}
}

// TestDescribeNamesThePathOnce: a model without a key names its file once,
// not once from gguf's key error and again from Describe.
func TestDescribeNamesThePathOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nokeys.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter(out)
	w.SetString("general.architecture", "llama")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Describe(path)
	if err == nil || strings.Count(err.Error(), path) != 1 || !strings.Contains(err.Error(), "llama.") {
		t.Errorf("error %v, want it to name %s once and the missing key", err, path)
	}
}
