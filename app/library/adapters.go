package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/hearthstudio/hearth/gguf"
)

// The formats of a LoRA adapter.
const (
	AdapterGGUF = "gguf" // llama.cpp's GGUF LoRA: what Hearth's training writes
	AdapterPEFT = "peft" // a Hugging Face PEFT folder
)

// peftConfig and peftWeights are the files of a PEFT adapter folder, as
// peft's save_pretrained names them.
const (
	peftConfig  = "adapter_config.json"
	peftWeights = "adapter_model.safetensors"
)

// maxPEFTConfig bounds the adapter_config.json read: peft writes about a
// kilobyte; a larger file is not a PEFT config.
const maxPEFTConfig = 1 << 20

// ErrAdapter is wrapped by the error for a LoRA adapter given where a model
// is wanted.
var ErrAdapter = errors.New("a LoRA adapter, not a model")

// AdapterInfo is what a LoRA adapter's GGUF header or PEFT config says.
type AdapterInfo struct {
	Format string // AdapterGGUF or AdapterPEFT
	// Arch is the base model's architecture (general.architecture); "" for
	// a PEFT folder, whose config does not name one.
	Arch string
	// BaseModel is the base model the file names, if any: a GGUF adapter's
	// general.base_model.0.name (or its repository), a PEFT folder's
	// base_model_name_or_path.
	BaseModel string
	Rank      int     // the pairs' rank; 0 when they differ or are unknown
	Alpha     float32 // lora_alpha (adapter.lora.alpha)
	Targets   int     // the base weights it adapts; 0 when unknown (PEFT)
	Params    int64   // the adapter's own weights; 0 when unknown (PEFT)
	// Bases are the names of the library's usable models the adapter fits:
	// for a GGUF adapter, the models of its architecture that have every
	// weight it adapts in the shape it expects; for a PEFT folder, whose
	// config names its base but not the shapes, the models named after
	// that base. Filled by ScanAll.
	Bases []string

	// shapes are the ggml shapes the base's weights must have.
	shapes matrixShapes
}

// For says which models an adapter is for, as its file says.
func (a *AdapterInfo) For() string {
	switch {
	case a.BaseModel != "":
		return a.BaseModel
	case a.Arch != "":
		return a.Arch + " models"
	}
	return "its base model"
}

// peftEntry is the entry of a PEFT folder a walk found. It is known to be
// an adapter before its config is read, so a broken one is listed among the
// adapters.
func peftEntry(dir, name, source string) Entry {
	e := Entry{Name: name, Path: dir, Source: source, Adapter: &AdapterInfo{Format: AdapterPEFT}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		e.Err = fmt.Sprintf("cannot read the folder: %v", err)
		return e
	}
	for _, d := range ents {
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			e.Size += info.Size()
		}
	}
	return e
}

// describeAny reads what path is: a PEFT folder's config (isDir), a GGUF
// adapter's header, or a model's, as Describe does. Exactly one of the
// Info and the AdapterInfo is non-nil, unless the file is not GGUF.
func describeAny(path string, isDir bool) (*Info, *AdapterInfo, error) {
	if isDir {
		a, err := describePEFT(path)
		return nil, a, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err // gguf's errors name the file
	}
	defer f.Close()
	if typ, _ := f.StringOr("general.type", ""); typ == "adapter" {
		a, err := describeAdapter(f)
		if err != nil {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, a, err
	}
	info, err := describeModel(f, path)
	return info, nil, err
}

// describeAdapter reads a GGUF LoRA adapter's keys and tensor table (no
// tensor data) as engine/adapter.ReadGGUF reads them: general.type =
// adapter, adapter.type = lora, adapter.lora.alpha, and per adapted weight
// NAME the tensors NAME.lora_a and NAME.lora_b. What it reads is returned
// with the first problem found, which loading the adapter would report.
func describeAdapter(f *gguf.File) (*AdapterInfo, error) {
	a := &AdapterInfo{Format: AdapterGGUF, Arch: f.Architecture(), shapes: matrixShapes{}}
	a.BaseModel = baseModelName(f)
	a.Params = int64(f.ParameterCount())
	if at, _ := f.StringOr("adapter.type", ""); at != "lora" {
		return a, fmt.Errorf("adapter.type is %q: Hearth applies LoRA adapters only", at)
	}
	if a.Arch == "" {
		return a, fmt.Errorf("general.architecture is missing: the adapter does not say which models it is for")
	}
	alpha, err := f.Float32Or("adapter.lora.alpha", 0)
	if err != nil {
		return a, err
	}
	a.Alpha = alpha

	type pair struct{ a, b []uint64 }
	pairs := map[string]*pair{}
	for _, t := range f.Tensors() {
		name, half, ok := strings.Cut(t.Name, ".lora_")
		if !ok || (half != "a" && half != "b") || len(t.Shape) < 1 || len(t.Shape) > 2 {
			return a, fmt.Errorf("tensor %q is not a .lora_a or .lora_b matrix", t.Name)
		}
		p := pairs[name]
		if p == nil {
			p = &pair{}
			pairs[name] = p
		}
		shape := []uint64{t.Shape[0], 1}
		if len(t.Shape) == 2 {
			shape[1] = t.Shape[1]
		}
		if half == "a" {
			p.a = shape
		} else {
			p.b = shape
		}
	}
	ranks := map[uint64]bool{}
	for _, name := range slices.Sorted(maps.Keys(pairs)) {
		p := pairs[name]
		if p.a == nil || p.b == nil {
			return a, fmt.Errorf("tensor %q has only one of its lora_a and lora_b", name)
		}
		if name == "token_embd.weight" {
			// The one pair llama.cpp stores transposed: lora_a [rank,
			// vocab], lora_b [rank, n_embd] for a base of [n_embd, vocab].
			ranks[p.a[0]] = true
			a.shapes[name] = [2]uint64{p.b[1], p.a[1]}
		} else {
			// lora_a [cols, rank], lora_b [rank, rows] for [cols, rows].
			ranks[p.b[0]] = true
			a.shapes[name] = [2]uint64{p.a[0], p.b[1]}
		}
	}
	a.Targets = len(pairs)
	if a.Targets == 0 {
		return a, fmt.Errorf("no .lora_a/.lora_b tensors: the adapter adapts nothing")
	}
	if len(ranks) == 1 {
		for r := range ranks {
			a.Rank = int(r)
		}
	}
	return a, nil
}

// baseModelName is the base model a GGUF file names in the keys
// convert_lora_to_gguf.py writes: general.base_model.0.name, with its
// organization when given, else its repository URL.
func baseModelName(f *gguf.File) string {
	name, _ := f.StringOr("general.base_model.0.name", "")
	if org, _ := f.StringOr("general.base_model.0.organization", ""); org != "" && name != "" {
		name = org + "/" + name
	}
	if name == "" {
		name, _ = f.StringOr("general.base_model.0.repo_url", "")
	}
	return name
}

// peftConfigJSON are the keys of adapter_config.json the library shows;
// engine/adapter.ReadPEFT checks the rest when the adapter is applied.
type peftConfigJSON struct {
	PeftType  string  `json:"peft_type"`
	BaseModel string  `json:"base_model_name_or_path"`
	R         int     `json:"r"`
	Alpha     float32 `json:"lora_alpha"`
}

// describePEFT reads a PEFT folder's config and checks that its weights
// are there in the form Hearth reads.
func describePEFT(dir string) (*AdapterInfo, error) {
	a := &AdapterInfo{Format: AdapterPEFT}
	path := filepath.Join(dir, peftConfig)
	f, err := os.Open(path)
	if err != nil {
		return a, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPEFTConfig+1))
	if err != nil {
		return a, fmt.Errorf("%s: %w", path, err)
	}
	if len(raw) > maxPEFTConfig {
		return a, fmt.Errorf("%s: larger than %d bytes: not a PEFT config", path, maxPEFTConfig)
	}
	var cfg peftConfigJSON
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return a, fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	a.BaseModel, a.Rank, a.Alpha = cfg.BaseModel, cfg.R, cfg.Alpha
	if cfg.PeftType != "LORA" {
		return a, fmt.Errorf("%s: peft_type %q: Hearth applies LoRA adapters only", path, cfg.PeftType)
	}
	if _, err := os.Stat(filepath.Join(dir, peftWeights)); err != nil {
		if _, berr := os.Stat(filepath.Join(dir, "adapter_model.bin")); berr == nil {
			return a, fmt.Errorf("%s: only adapter_model.bin, a PyTorch pickle, which Hearth does not read: save the adapter as %s", dir, peftWeights)
		}
		return a, fmt.Errorf("%s: no %s", dir, peftWeights)
	}
	return a, nil
}

// matchBases fills each usable adapter's Bases from the usable models.
func matchBases(adapters, models []Entry) {
	for i := range adapters {
		a := adapters[i].Adapter
		if a == nil || adapters[i].Err != "" {
			continue
		}
		a.Bases = nil
		for _, m := range models {
			if m.Err == "" && m.Info != nil && fits(a, m) {
				a.Bases = append(a.Bases, m.Name)
			}
		}
	}
}

// fits reports whether adapter a is for model m: for a GGUF adapter, the
// architecture and the shape of every weight it adapts, as llama.cpp checks
// them when it applies one; for a PEFT folder, the base model's name.
func fits(a *AdapterInfo, m Entry) bool {
	if a.Format == AdapterPEFT {
		base := a.BaseModel
		if i := strings.LastIndexByte(base, '/'); i >= 0 {
			base = base[i+1:]
		}
		b := nameKey(base)
		return b != "" && (strings.Contains(nameKey(m.Name), b) || nameKey(m.Info.ModelName) == b)
	}
	if a.Arch != m.Info.Arch || len(a.shapes) == 0 || m.Info.matrices == nil {
		return false
	}
	for name, want := range a.shapes {
		if (*m.Info.matrices)[name] != want {
			return false
		}
	}
	return true
}

// nameKey is a model name reduced to its lower-case letters and digits, so
// that "Qwen2.5 0.5B Instruct", Qwen2.5-0.5B-Instruct and
// qwen2.5-0.5b-instruct-q4_k_m compare.
func nameKey(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}
