package library

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
)

// tinyModel is a real GGUF written once per test binary by engine/synth and
// linked into every fake store.
type tinyModel struct {
	path      string
	arch      string
	quant     string
	params    int64
	context   int
	layers    int
	embedding int
	size      int64
}

var tinyQwen, tinyLlama, tinyGemma tinyModel

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hearth-library-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, x := range []struct {
		dst           *tinyModel
		preset, quant string
	}{{&tinyQwen, "tiny-qwen2", "Q8_0"}, {&tinyLlama, "tiny-llama", "Q4_K_M"}, {&tinyGemma, "tiny-gemma3", "F32"}} {
		if err := writeTiny(x.dst, dir, x.preset, x.quant); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	if err := writeProjectors(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func writeTiny(dst *tinyModel, dir, preset, quant string) error {
	p, ok := synth.PresetByName(preset)
	if !ok {
		return fmt.Errorf("no preset %s", preset)
	}
	opts := synth.Options{Quant: quant, Seed: 1}
	layout, err := synth.Plan(p, opts)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, preset+".gguf")
	if err := synth.WriteFile(path, p, opts); err != nil {
		return err
	}
	*dst = tinyModel{path: path, arch: p.Arch, quant: quant, params: int64(layout.Params),
		context: p.Context, layers: p.Layers, embedding: p.Hidden, size: layout.FileSize}
	return nil
}

// place puts a copy of src at dst (a hard link where the file system
// allows), creating the folders.
func place(t *testing.T, src, dst string) {
	t.Helper()
	mkdir(t, filepath.Dir(dst))
	if os.Link(src, dst) == nil {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dst, b)
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	mkdir(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func manifest(t *testing.T, root, name string, layers ...layer) {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"layers":        layers,
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "manifests", filepath.FromSlash(name)), b)
}

// fixture is a machine's worth of fake stores.
type fixture struct {
	roots Roots

	ollamaQwen, ollamaLlama string // blob paths
	hfMain, hfOld           string // the snapshot files of one name in two snapshots
	hfOnlyOld, hfSub        string
	lmQwen                  string
	folderA, folderB        string
	folderUnique, split     string
	notGGUF, truncated      string
	deepest                 string
	hfBrokenSnapshots       string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{}

	// Ollama: two namespaces, both blob namings, and each way a store breaks.
	oll := filepath.Join(base, "ollama")
	qwenHex, llamaHex := fileDigest(t, tinyQwen.path), fileDigest(t, tinyLlama.path)
	fx.ollamaQwen = filepath.Join(oll, "blobs", "sha256-"+qwenHex)
	fx.ollamaLlama = filepath.Join(oll, "blobs", "sha256:"+llamaHex) // the pre-0.1.34 naming
	place(t, tinyQwen.path, fx.ollamaQwen)
	place(t, tinyLlama.path, fx.ollamaLlama)
	tmpl := []byte("{{ .Prompt }}")
	tmplHex := sha256.Sum256(tmpl)
	write(t, filepath.Join(oll, "blobs", "sha256-"+hex.EncodeToString(tmplHex[:])), tmpl)
	params := []byte(`{"temperature":0.7}`)
	paramsHex := sha256.Sum256(params)
	write(t, filepath.Join(oll, "blobs", "sha256-"+hex.EncodeToString(paramsHex[:])), params)

	qwenLayers := []layer{
		{ollamaModel, "sha256:" + qwenHex, tinyQwen.size},
		{ollamaTemplate, "sha256:" + hex.EncodeToString(tmplHex[:]), int64(len(tmpl))},
		{ollamaParams, "sha256:" + hex.EncodeToString(paramsHex[:]), int64(len(params))},
	}
	manifest(t, oll, "registry.ollama.ai/library/qwen/0.5b", qwenLayers...)
	manifest(t, oll, "registry.ollama.ai/library/qwen/latest", qwenLayers...)
	manifest(t, oll, "registry.ollama.ai/someuser/llama/q4", layer{ollamaModel, "sha256:" + llamaHex, tinyLlama.size})
	manifest(t, oll, "hf.co/owner/repo/Q8_0", layer{ollamaModel, "sha256:" + qwenHex, tinyQwen.size})
	manifest(t, oll, "registry.ollama.ai/library/gone/latest", layer{ollamaModel, "sha256:" + strings.Repeat("ab", 32), 1000})
	manifest(t, oll, "registry.ollama.ai/library/short/latest", layer{ollamaModel, "sha256:" + qwenHex, tinyQwen.size + 1})
	manifest(t, oll, "registry.ollama.ai/library/nomodel/latest", qwenLayers[1])
	manifest(t, oll, "registry.ollama.ai/library/baddigest/latest", layer{ollamaModel, "sha256:../../../etc/passwd", 10})
	write(t, filepath.Join(oll, "manifests", "registry.ollama.ai", "library", "broken", "latest"), []byte("{not json"))
	write(t, filepath.Join(oll, "manifests", ".DS_Store"), []byte("junk"))

	// Hugging Face: two snapshots of one file, refs/main naming the older
	// one by time; a subfolder; a projector; a link to a blob not there.
	hf := filepath.Join(base, "hf", "hub")
	repo := filepath.Join(hf, "models--Qwen--Qwen2.5-0.5B-Instruct-GGUF")
	place(t, tinyQwen.path, filepath.Join(repo, "blobs", "qwenblob"))
	place(t, tinyLlama.path, filepath.Join(repo, "blobs", "llamablob"))
	write(t, filepath.Join(repo, "refs", "main"), []byte("mainmain\n"))
	mainSnap, oldSnap := filepath.Join(repo, "snapshots", "mainmain"), filepath.Join(repo, "snapshots", "oldold")
	fx.hfMain = filepath.Join(mainSnap, "qwen-q8_0.gguf")
	fx.hfOld = filepath.Join(oldSnap, "qwen-q8_0.gguf")
	fx.hfOnlyOld = filepath.Join(oldSnap, "only-old.gguf")
	fx.hfSub = filepath.Join(mainSnap, "Q4", "sub.gguf")
	symlink(t, "../../blobs/qwenblob", fx.hfMain)
	symlink(t, "../../blobs/llamablob", fx.hfOld)
	symlink(t, "../../blobs/llamablob", fx.hfOnlyOld)
	symlink(t, "../../../blobs/llamablob", fx.hfSub)
	symlink(t, "../../blobs/qwenblob", filepath.Join(mainSnap, "mmproj-model-f16.gguf"))
	symlink(t, "../../blobs/notyet", filepath.Join(mainSnap, "partial.gguf"))
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(oldSnap, future, future); err != nil {
		t.Fatal(err)
	}
	place(t, tinyQwen.path, filepath.Join(hf, "datasets--someone--data", "snapshots", "x", "d.gguf"))
	place(t, tinyQwen.path, filepath.Join(hf, "models--gpt2", "snapshots", "c0ffee", "gpt2.gguf"))
	fx.hfBrokenSnapshots = filepath.Join(hf, "models--broken--repo", "snapshots")
	write(t, fx.hfBrokenSnapshots, []byte("a file where a folder should be"))

	// LM Studio: its new folder, and its old one linked to it.
	lm := filepath.Join(base, "lmstudio")
	fx.lmQwen = filepath.Join(lm, "lmstudio-community", "Qwen-GGUF", "qwen-q8_0.gguf")
	place(t, tinyQwen.path, fx.lmQwen)
	place(t, tinyQwen.path, filepath.Join(lm, "lmstudio-community", "Qwen-GGUF", "mmproj-qwen-f16.gguf"))
	place(t, tinyQwen.path, filepath.Join(lm, "loose.gguf")) // not PUBLISHER/REPO/FILE
	lmOld := filepath.Join(base, "lm-studio-old")
	symlink(t, lm, lmOld)

	// A user folder: a name collision, a split model, files that are not
	// models, a link loop, a hidden folder and one too deep.
	dir := filepath.Join(base, "models")
	fx.folderA = filepath.Join(dir, "a", "tiny.gguf")
	fx.folderB = filepath.Join(dir, "b", "tiny.gguf")
	fx.folderUnique = filepath.Join(dir, "unique.gguf")
	place(t, tinyQwen.path, fx.folderA)
	place(t, tinyLlama.path, fx.folderB)
	place(t, tinyLlama.path, fx.folderUnique)
	for i := 1; i <= 3; i++ {
		place(t, tinyQwen.path, filepath.Join(dir, "split", fmt.Sprintf("big-%05d-of-00003.gguf", i)))
	}
	fx.split = filepath.Join(dir, "split", "big-00001-of-00003.gguf")
	fx.notGGUF = filepath.Join(dir, "notes.gguf")
	write(t, fx.notGGUF, []byte("these are not weights\n"))
	whole, err := os.ReadFile(tinyQwen.path)
	if err != nil {
		t.Fatal(err)
	}
	fx.truncated = filepath.Join(dir, "truncated.gguf")
	write(t, fx.truncated, whole[:len(whole)/2])
	write(t, filepath.Join(dir, "README.md"), []byte("models"))
	symlink(t, ".", filepath.Join(dir, "loop"))
	place(t, tinyQwen.path, filepath.Join(dir, ".git", "hidden.gguf"))
	fx.deepest = filepath.Join(dir, "1", "2", "3", "4", "deepest.gguf")
	place(t, tinyQwen.path, fx.deepest)
	place(t, tinyQwen.path, filepath.Join(dir, "1", "2", "3", "4", "5", "too-deep.gguf"))

	fx.roots = Roots{
		Ollama:   oll,
		HFCache:  hf,
		LMStudio: []string{lm, lmOld, filepath.Join(base, "not-installed")},
		Folders:  []string{dir},
	}
	return fx
}

// want is what a test expects of one entry; zero fields are not checked.
type want struct {
	source   string
	path     string
	model    *tinyModel // Info must describe this model
	parts    int
	size     int64
	err      string // a substring of Err
	noInfo   bool
	ollamaTm bool   // a template and params layer are recorded
	proj     string // the projector: "" checks that there is none
}

func TestScan(t *testing.T) {
	fx := newFixture(t)
	entries := Scan(fx.roots)

	wants := map[string]want{
		// Ollama
		"qwen:0.5b":             {source: SourceOllama, path: fx.ollamaQwen, model: &tinyQwen, ollamaTm: true},
		"qwen:latest":           {source: SourceOllama, path: fx.ollamaQwen, model: &tinyQwen},
		"someuser/llama:q4":     {source: SourceOllama, path: fx.ollamaLlama, model: &tinyLlama},
		"hf.co/owner/repo:Q8_0": {source: SourceOllama, path: fx.ollamaQwen, model: &tinyQwen},
		"gone:latest":           {source: SourceOllama, err: "blob " + filepath.Join(fx.roots.Ollama, "blobs", "sha256-"+strings.Repeat("ab", 32)) + " is missing", noInfo: true},
		"short:latest":          {source: SourceOllama, err: fmt.Sprintf("%d bytes, but the manifest says %d", tinyQwen.size, tinyQwen.size+1), noInfo: true},
		"nomodel:latest":        {source: SourceOllama, err: "no model layer", noInfo: true},
		"baddigest:latest":      {source: SourceOllama, err: "is not sha256:<64 hex digits>", noInfo: true},
		"broken:latest":         {source: SourceOllama, err: "not an Ollama manifest", noInfo: true},
		// Hugging Face
		"Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen-q8_0.gguf": {source: SourceHuggingFace, path: fx.hfMain, model: &tinyQwen},
		"Qwen/Qwen2.5-0.5B-Instruct-GGUF:only-old.gguf":  {source: SourceHuggingFace, path: fx.hfOnlyOld, model: &tinyLlama},
		"Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4/sub.gguf":    {source: SourceHuggingFace, path: fx.hfSub, model: &tinyLlama},
		"Qwen/Qwen2.5-0.5B-Instruct-GGUF:partial.gguf":   {source: SourceHuggingFace, err: "points to a missing file", noInfo: true},
		"gpt2:gpt2.gguf":     {source: SourceHuggingFace, model: &tinyQwen},
		fx.hfBrokenSnapshots: {source: SourceHuggingFace, err: "cannot read the folder", noInfo: true},
		// LM Studio
		"lmstudio-community/Qwen-GGUF/qwen-q8_0.gguf": {source: SourceLMStudio, path: fx.lmQwen, model: &tinyQwen},
		// The user folder
		"a/tiny":             {source: SourceFolder, path: fx.folderA, model: &tinyQwen},
		"b/tiny":             {source: SourceFolder, path: fx.folderB, model: &tinyLlama},
		"unique":             {source: SourceFolder, path: fx.folderUnique, model: &tinyLlama},
		"deepest":            {source: SourceFolder, path: fx.deepest, model: &tinyQwen},
		"big-00001-of-00003": {source: SourceFolder, path: fx.split, parts: 3, size: 3 * tinyQwen.size, err: "split GGUF (3 parts) is not supported yet"},
		"notes":              {source: SourceFolder, path: fx.notGGUF, err: fx.notGGUF + ": not a GGUF file", noInfo: true},
		"truncated":          {source: SourceFolder, path: fx.truncated, err: fx.truncated, noInfo: true},
	}

	if !slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("entries are not sorted by name")
	}
	got := map[string]Entry{}
	for _, e := range entries {
		if _, dup := got[e.Name]; dup {
			t.Errorf("name %q listed twice", e.Name)
		}
		got[e.Name] = e
		if _, ok := wants[e.Name]; !ok {
			t.Errorf("unexpected entry %q (%s, %s, err %q)", e.Name, e.Source, e.Path, e.Err)
		}
	}
	for name, w := range wants {
		e, ok := got[name]
		if !ok {
			t.Errorf("%s: not listed", name)
			continue
		}
		checkEntry(t, e, w)
	}
}

func checkEntry(t *testing.T, e Entry, w want) {
	t.Helper()
	if e.Source != w.source {
		t.Errorf("%s: source %q, want %q", e.Name, e.Source, w.source)
	}
	if w.path != "" && e.Path != w.path {
		t.Errorf("%s: path %s, want %s", e.Name, e.Path, w.path)
	}
	if w.err == "" && e.Err != "" {
		t.Errorf("%s: unexpected error %q", e.Name, e.Err)
	}
	if w.err != "" && !strings.Contains(e.Err, w.err) {
		t.Errorf("%s: error %q, want it to contain %q", e.Name, e.Err, w.err)
	}
	if e.Parts != w.parts {
		t.Errorf("%s: %d parts, want %d", e.Name, e.Parts, w.parts)
	}
	if w.size != 0 && e.Size != w.size {
		t.Errorf("%s: size %d, want %d", e.Name, e.Size, w.size)
	}
	if w.noInfo != (e.Info == nil) {
		t.Errorf("%s: info %+v, want none: %v", e.Name, e.Info, w.noInfo)
	}
	if e.Projector != w.proj {
		t.Errorf("%s: projector %q, want %q", e.Name, e.Projector, w.proj)
	}
	if w.ollamaTm && (e.Ollama == nil || e.Ollama.Template == "" || e.Ollama.Params == "" || e.Ollama.System != "") {
		t.Errorf("%s: Ollama layers %+v, want a template and params", e.Name, e.Ollama)
	}
	if m := w.model; m != nil {
		if e.Size != m.size {
			t.Errorf("%s: size %d, want %d", e.Name, e.Size, m.size)
		}
		checkInfo(t, e.Name, e.Info, m)
	}
	if w.parts > 0 && e.Info != nil {
		if e.Info.Params != int64(w.parts)*tinyQwen.params || e.Info.Arch != tinyQwen.arch {
			t.Errorf("%s: info %+v, want %s with the weights of every part", e.Name, e.Info, tinyQwen.arch)
		}
	}
}

func checkInfo(t *testing.T, name string, info *Info, m *tinyModel) {
	t.Helper()
	if info == nil {
		t.Errorf("%s: no info", name)
		return
	}
	if info.Arch != m.arch || info.Params != m.params || info.Quant != m.quant || info.Context != m.context || info.Layers != m.layers || info.Embedding != m.embedding {
		t.Errorf("%s: info %s %d params %s ctx %d layers %d width %d, want %s %d %s %d %d %d", name,
			info.Arch, info.Params, info.Quant, info.Context, info.Layers, info.Embedding, m.arch, m.params, m.quant, m.context, m.layers, m.embedding)
	}
	if info.MemoryContext != min(m.context, model.DefaultContext) {
		t.Errorf("%s: memory at %d positions, want %d", name, info.MemoryContext, min(m.context, model.DefaultContext))
	}
	// The weights go up as stored, so the estimate is at least the tensor
	// bytes less the embedding the GPU forward leaves on the host.
	if info.Memory.KV <= 0 || info.Memory.Activations <= 0 || info.Memory.Weights <= 0 || info.Memory.Total() >= 4*m.size+info.Memory.KV+info.Memory.Activations {
		t.Errorf("%s: memory %v, file %d bytes", name, info.Memory, m.size)
	}
}

// TestDescribeHeaders covers the header reading alone, on files the stores
// do not have: a model Hearth cannot run and a file without
// general.file_type.
func TestDescribeHeaders(t *testing.T) {
	dir := t.TempDir()
	writeGGUF := func(name string, set func(w *gguf.Writer) error) string {
		path := filepath.Join(dir, name)
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := gguf.NewWriter(fh)
		if err := set(w); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// 34 blocks of Q8_0 (32 weights each) and a 32-wide F32 norm: the most
	// weights are Q8_0.
	noFileType := writeGGUF("no-file-type.gguf", func(w *gguf.Writer) error {
		return errors.Join(
			w.SetString("general.architecture", "llama"),
			w.SetUint32("llama.context_length", 4096),
			w.AddTensor("blk.0.attn_q.weight", gguf.TypeQ8_0, []uint64{32, 34}),
			w.AddTensor("blk.0.attn_norm.weight", gguf.TypeF32, []uint64{32}),
			w.WriteTensorBytes("blk.0.attn_q.weight", make([]byte, 34*34)),
			w.WriteTensorBytes("blk.0.attn_norm.weight", make([]byte, 32*4)),
		)
	})
	unsupported := writeGGUF("mamba.gguf", func(w *gguf.Writer) error {
		return errors.Join(
			w.SetString("general.architecture", "mamba"),
			w.SetString("general.name", "Some Mamba"),
			w.SetUint32("general.file_type", 7),
			w.SetUint32("mamba.context_length", 1048576),
			w.SetUint32("mamba.block_count", 64),
			w.AddTensor("w", gguf.TypeF16, []uint64{8, 8}),
			w.WriteTensorBytes("w", make([]byte, 128)),
		)
	})

	tests := []struct {
		name    string
		path    string
		want    Info
		noInfo  bool
		err     string
		errIs   error
		loadMem bool
	}{
		{name: "qwen", path: tinyQwen.path, want: Info{Arch: "qwen2", Params: tinyQwen.params, Quant: "Q8_0", Context: 2048, Layers: 2, Embedding: 96}, loadMem: true},
		{name: "llama", path: tinyLlama.path, want: Info{Arch: "llama", Params: tinyLlama.params, Quant: "Q4_K_M", Context: 2048, Layers: 2, Embedding: 256}, loadMem: true},
		{name: "no file type", path: noFileType, want: Info{Arch: "llama", Params: 34*32 + 32, Quant: "Q8_0", Context: 4096},
			err: "missing"}, // its keys are not a model's: the loader says which is missing
		{name: "unsupported", path: unsupported, want: Info{Arch: "mamba", ModelName: "Some Mamba", Params: 64, Quant: "Q8_0", Context: 1048576, Layers: 64},
			err: `architecture "mamba" is not supported`},
		{name: "missing", path: filepath.Join(dir, "nope.gguf"), noInfo: true, errIs: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Describe(tt.path)
			switch {
			case tt.err == "" && tt.errIs == nil && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.path)):
				t.Fatalf("error %v, want one naming the file and containing %q", err, tt.err)
			case tt.errIs != nil && !errors.Is(err, tt.errIs):
				t.Fatalf("error %v, want %v", err, tt.errIs)
			}
			if tt.noInfo {
				if info != nil {
					t.Errorf("info %+v, want none", info)
				}
				return
			}
			if info == nil {
				t.Fatal("no info")
			}
			got := *info
			if tt.loadMem != (got.Memory.Total() > 0) {
				t.Errorf("memory %v, want an estimate: %v", got.Memory, tt.loadMem)
			}
			got.Memory, got.MemoryContext, got.matrices = model.Memory{}, 0, nil
			if tt.want.ModelName == "" {
				got.ModelName = "" // synth names its models; not what is tested here
			}
			if got != tt.want {
				t.Errorf("info %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDescribeRefusesFilesThatAreNotModels(t *testing.T) {
	fx := newFixture(t)
	tests := []struct {
		name  string
		path  string
		errIs error
	}{
		{"text", fx.notGGUF, gguf.ErrNotGGUF},
		{"truncated", fx.truncated, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Describe(tt.path)
			if err == nil || info != nil || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("info %+v, error %v; want no info and an error naming the file", info, err)
			}
			if tt.errIs != nil && !errors.Is(err, tt.errIs) {
				t.Errorf("error %v, want %v", err, tt.errIs)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	fx := newFixture(t)
	lib := New(fx.roots)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relUnique, err := filepath.Rel(cwd, fx.folderUnique)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		paths     bool // Resolve, else ResolveName
		wantPath  string
		wantName  string
		wantModel *tinyModel
		err       []string // substrings of the error
		unknown   bool     // the error wraps ErrUnknown
	}{
		{name: "qwen:0.5b", wantPath: fx.ollamaQwen, wantModel: &tinyQwen},
		{name: "qwen", wantPath: fx.ollamaQwen, wantName: "qwen:latest"},
		{name: "library/qwen:0.5b", wantPath: fx.ollamaQwen, wantName: "qwen:0.5b"},
		{name: "registry.ollama.ai/library/qwen:0.5b", wantPath: fx.ollamaQwen, wantName: "qwen:0.5b"},
		{name: "someuser/llama:q4", wantPath: fx.ollamaLlama, wantModel: &tinyLlama},
		{name: "registry.ollama.ai/someuser/llama:q4", wantPath: fx.ollamaLlama, wantName: "someuser/llama:q4"},
		{name: "hf.co/owner/repo:Q8_0", wantPath: fx.ollamaQwen},
		{name: "Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen-q8_0.gguf", wantPath: fx.hfMain, wantModel: &tinyQwen},
		{name: "lmstudio-community/Qwen-GGUF/qwen-q8_0.gguf", wantPath: fx.lmQwen},
		{name: "a/tiny", wantPath: fx.folderA},
		{name: "unique", wantPath: fx.folderUnique, paths: true},

		// Names are case-sensitive; near matches are suggested.
		{name: "Qwen:0.5b", unknown: true, err: []string{"qwen:0.5b", "qwen:latest", "hearth models"}},
		{name: "qwen:7b", unknown: true, err: []string{"did you mean", "qwen:0.5b", "qwen:latest"}},
		{name: "tiny", unknown: true, err: []string{"a/tiny", "b/tiny"}},
		{name: "zzz", unknown: true, err: []string{`unknown model "zzz"; hearth models lists`}},
		{name: "", unknown: true},

		// Found, but not usable: the error says why.
		{name: "gone:latest", err: []string{"is missing", "ollama pull gone:latest"}},
		{name: "big-00001-of-00003", err: []string{"split GGUF (3 parts) is not supported yet"}},
		{name: "notes", err: []string{"not a GGUF file"}},

		// A name is never a path for ResolveName, however it is spelled.
		{name: "../../etc/passwd", unknown: true},
		{name: "/etc/passwd:latest", unknown: true},
		{name: "/etc/passwd", unknown: true},
		{name: fx.folderUnique, unknown: true},
		{name: relUnique, unknown: true},
		{name: "../blobs/sha256-" + fileDigest(t, tinyQwen.path), unknown: true},
		{name: fx.hfBrokenSnapshots, unknown: true}, // an unreadable folder's report is no model
		{name: filepath.Join(fx.roots.Ollama, "manifests", "registry.ollama.ai", "library", "qwen", "0.5b"), unknown: true},

		// Resolve takes a path as well, and a path that exists wins.
		{name: fx.folderUnique, paths: true, wantPath: fx.folderUnique, wantName: fx.folderUnique, wantModel: &tinyLlama},
		{name: relUnique, paths: true, wantPath: relUnique, wantName: relUnique},
		{name: fx.ollamaQwen, paths: true, wantPath: fx.ollamaQwen, wantModel: &tinyQwen}, // a blob: no extension
		{name: "/etc/passwd:latest", paths: true, unknown: true},
		{name: filepath.Join(fx.roots.Folders[0], "nope.gguf"), paths: true, unknown: true, err: []string{"no such file"}},
		{name: fx.roots.Folders[0], paths: true, err: []string{"is a folder"}},
		{name: fx.split, paths: true, err: []string{"split GGUF (3 parts) is not supported yet"}},
	}
	for _, tt := range tests {
		fn, call := lib.ResolveName, "ResolveName"
		if tt.paths {
			fn, call = lib.Resolve, "Resolve"
		}
		t.Run(call+"/"+tt.name, func(t *testing.T) {
			e, err := fn(tt.name)
			if tt.err == nil && !tt.unknown {
				if err != nil {
					t.Fatal(err)
				}
				if e.Path != tt.wantPath {
					t.Errorf("path %s, want %s", e.Path, tt.wantPath)
				}
				if want := cmpOr(tt.wantName, tt.name); e.Name != want {
					t.Errorf("name %q, want %q", e.Name, want)
				}
				if e.Info == nil {
					t.Fatal("no info")
				}
				if tt.wantModel != nil {
					checkInfo(t, e.Name, e.Info, tt.wantModel)
				}
				return
			}
			if err == nil {
				t.Fatalf("resolved to %+v, want an error", e)
			}
			if tt.unknown != errors.Is(err, ErrUnknown) {
				t.Errorf("error %q: wraps ErrUnknown %v, want %v", err, !tt.unknown, tt.unknown)
			}
			for _, s := range tt.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestResolveAmbiguous(t *testing.T) {
	base := t.TempDir()
	// Two LM Studio folders (not links of each other) with the same file.
	a, b := filepath.Join(base, "new"), filepath.Join(base, "old")
	place(t, tinyQwen.path, filepath.Join(a, "pub", "repo", "m.gguf"))
	place(t, tinyLlama.path, filepath.Join(b, "pub", "repo", "m.gguf"))
	_, err := ResolveName(Roots{LMStudio: []string{a, b}}, "pub/repo/m.gguf")
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || errors.Is(err, ErrUnknown) {
		t.Errorf("error %v, want ambiguous", err)
	}
}

// TestScanRemembersHeaders checks that a Library reads a header again only
// when the file's size or modification time changed.
func TestScanRemembersHeaders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	place(t, tinyQwen.path, path)
	lib := New(Roots{Folders: []string{dir}})
	first := lib.Scan()
	if len(first) != 1 || first[0].Info == nil || first[0].Err != "" {
		t.Fatalf("first scan: %+v", first)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// The same size and time, other bytes: the library trusts what it read.
	if err := os.Remove(path); err != nil { // the fixture is a hard link
		t.Fatal(err)
	}
	write(t, path, make([]byte, st.Size()))
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if again := lib.Scan(); len(again) != 1 || again[0].Info == nil || again[0].Err != "" {
		t.Errorf("unchanged size and time: %+v, want the remembered header", again)
	}

	// A new modification time: read again, and the zeros are no GGUF.
	later := st.ModTime().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if again := lib.Scan(); len(again) != 1 || again[0].Info != nil || !strings.Contains(again[0].Err, "not a GGUF file") {
		t.Errorf("changed file: %+v, want it read again", again)
	}
	// A fresh library reads it too.
	if fresh := Scan(Roots{Folders: []string{dir}}); len(fresh) != 1 || fresh[0].Err == "" {
		t.Errorf("fresh scan: %+v", fresh)
	}
}

func TestScanReportsUnreadableFolders(t *testing.T) {
	base := t.TempDir()
	gone := filepath.Join(base, "unplugged-disk")
	entries := Scan(Roots{Folders: []string{gone}, Ollama: filepath.Join(base, "no-ollama"), HFCache: filepath.Join(base, "no-hf")})
	if len(entries) != 1 || entries[0].Source != SourceFolder || !strings.Contains(entries[0].Err, gone) {
		t.Errorf("entries %+v, want one naming the missing folder", entries)
	}

	if os.Geteuid() == 0 {
		t.Log("running as root, which reads any folder: the permission case is not checked")
		return
	}
	locked := filepath.Join(base, "models", "locked")
	place(t, tinyQwen.path, filepath.Join(locked, "x.gguf"))
	place(t, tinyQwen.path, filepath.Join(base, "models", "ok.gguf"))
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	entries = Scan(Roots{Folders: []string{filepath.Join(base, "models")}})
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if len(entries) != 2 || !slices.Contains(names, "ok") || !slices.ContainsFunc(entries, func(e Entry) bool {
		return e.Name == locked && strings.Contains(e.Err, "cannot read the folder")
	}) {
		t.Errorf("entries %+v, want ok and the locked folder", entries)
	}
}

func TestDefaultRoots(t *testing.T) {
	home := filepath.FromSlash("/home/u")
	vars := []string{"OLLAMA_MODELS", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"}
	lmstudio := []string{filepath.Join(home, ".lmstudio", "models"), filepath.Join(home, ".cache", "lm-studio", "models")}
	tests := []struct {
		name       string
		env        map[string]string
		ollama, hf string
	}{
		{"defaults", nil, filepath.Join(home, ".ollama", "models"), filepath.Join(home, ".cache", "huggingface", "hub")},
		{"OLLAMA_MODELS", map[string]string{"OLLAMA_MODELS": "/srv/ollama"}, "/srv/ollama", filepath.Join(home, ".cache", "huggingface", "hub")},
		{"HF_HOME", map[string]string{"HF_HOME": "/srv/hf"}, filepath.Join(home, ".ollama", "models"), filepath.Join("/srv/hf", "hub")},
		{"HF_HUB_CACHE over HF_HOME", map[string]string{"HF_HUB_CACHE": "/srv/hub", "HF_HOME": "/srv/hf"}, filepath.Join(home, ".ollama", "models"), "/srv/hub"},
		{"HUGGINGFACE_HUB_CACHE", map[string]string{"HUGGINGFACE_HUB_CACHE": "/srv/old"}, filepath.Join(home, ".ollama", "models"), "/srv/old"},
		{"XDG_CACHE_HOME", map[string]string{"XDG_CACHE_HOME": "/srv/cache"}, filepath.Join(home, ".ollama", "models"), filepath.Join("/srv/cache", "huggingface", "hub")},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "/srv/config"}, filepath.Join(home, ".ollama", "models"), filepath.Join(home, ".cache", "huggingface", "hub")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv("USERPROFILE", home) // os.UserHomeDir on Windows
			for _, v := range vars {
				t.Setenv(v, tt.env[v])
			}
			r := DefaultRoots()
			if r.Ollama != tt.ollama || r.HFCache != tt.hf || !slices.Equal(r.LMStudio, lmstudio) || r.Folders != nil {
				t.Errorf("roots %+v, want Ollama %s, HF %s, LM Studio %v", r, tt.ollama, tt.hf, lmstudio)
			}
			// Hearth's own folders, where the studio makes models and
			// training writes adapters, are in every command's library.
			config := filepath.Join(home, ".config")
			if c := tt.env["XDG_CONFIG_HOME"]; c != "" {
				config = c
			}
			if runtime.GOOS == "linux" && !slices.Equal(r.Hearth, HearthFolders(filepath.Join(config, "hearth"))) {
				t.Errorf("Hearth folders %v, want models and adapters in %s", r.Hearth, filepath.Join(config, "hearth"))
			}
		})
	}
}

// TestMemoryEstimateMatchesModel holds Describe's estimate, made from the
// header alone, to the one the loaded model gives, for every architecture
// (tied and untied heads, fused projections, biases, QK-norms, post-norms).
func TestMemoryEstimateMatchesModel(t *testing.T) {
	dir := t.TempDir()
	for _, p := range synth.Presets() {
		if !strings.HasPrefix(p.Name, "tiny-") {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			path := filepath.Join(dir, p.Name+".gguf")
			if err := synth.WriteFile(path, p, synth.Options{Quant: "Q4_K_M", Seed: 2}); err != nil {
				t.Fatal(err)
			}
			info, err := Describe(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := min(m.Config.Context, model.DefaultContext)
			if want := m.Memory(ctx, MemoryBatch); info.Memory != want || info.MemoryContext != ctx {
				t.Errorf("estimate %+v at %d positions, the loaded model's %+v at %d", info.Memory, info.MemoryContext, want, ctx)
			}
		})
	}
}
