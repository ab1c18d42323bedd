package server

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// lookup finds the model a request names among the catalogue's, as Ollama
// does: "llama3.2" is "llama3.2:latest" (and the other way round for a file
// named without a tag), the registry and "library/" namespace may be
// spelled out, and case does not matter when nothing matches exactly. The
// name is only ever compared with the catalogue's names, never used as a
// path.
func (s *server) lookup(name string) (Model, bool) {
	if name == "" {
		return Model{}, false
	}
	short := strings.TrimPrefix(name, "registry.ollama.ai/")
	short = strings.TrimPrefix(short, "library/")
	want := []string{name, short}
	if base, ok := strings.CutSuffix(short, ":latest"); ok {
		want = append(want, base)
	} else if !strings.Contains(short[strings.LastIndex(short, "/")+1:], ":") {
		want = append(want, short+":latest")
	}
	models := s.o.Models.List()
	for _, match := range []func(a, b string) bool{func(a, b string) bool { return a == b }, strings.EqualFold} {
		for _, w := range want {
			for _, m := range models {
				if match(m.Name, w) {
					return m, true
				}
			}
		}
	}
	return Model{}, false
}

// find is lookup for a request, with the 404 each API gives.
func (s *server) find(a api, name string) (Model, error) {
	if strings.TrimSpace(name) == "" {
		return Model{}, badRequest("model", "model is required: name one of GET %s", map[api]string{openAIAPI: "/v1/models", ollamaAPI: "/api/tags"}[a])
	}
	m, ok := s.lookup(name)
	if !ok {
		msg := fmt.Sprintf("model '%s' not found", name)
		if a == openAIAPI {
			msg = fmt.Sprintf("The model `%s` does not exist: GET /v1/models lists the models on this machine", name)
		}
		return Model{}, &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found", msg: msg}
	}
	return m, nil
}

// sortedModels is the catalogue by name, so listings are stable.
func (s *server) sortedModels() []Model {
	models := s.o.Models.List()
	sort.Slice(models, func(i, j int) bool { return models[i].Name < models[j].Name })
	return models
}

// openAIModel is an entry of OpenAI's model list.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func toOpenAIModel(m Model) openAIModel {
	owner := "library" // Ollama's name for models without a namespace
	if i := strings.LastIndex(m.Name, "/"); i > 0 {
		owner = m.Name[:i]
	}
	return openAIModel{ID: m.Name, Object: "model", Created: m.Modified.Unix(), OwnedBy: owner}
}

func (s *server) listModels(w http.ResponseWriter, r *http.Request) error {
	data := []openAIModel{}
	for _, m := range s.sortedModels() {
		data = append(data, toOpenAIModel(m))
	}
	return writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{"list", data})
}

func (s *server) getModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.find(openAIAPI, r.PathValue("model"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toOpenAIModel(m))
}

// ollamaDetails is the details object of Ollama's model listings.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func detailsOf(m Model) ollamaDetails {
	d := ollamaDetails{Format: "gguf", Family: m.Family, ParameterSize: parameterSize(m.Params), QuantizationLevel: m.Quant}
	if m.Family != "" {
		d.Families = []string{m.Family}
	}
	return d
}

// parameterSize writes a parameter count as Ollama does: "8.0B", "494.03M".
func parameterSize(n uint64) string {
	switch x := float64(n); {
	case n == 0:
		return ""
	case x >= 1e9:
		return fmt.Sprintf("%.1fB", x/1e9)
	case x >= 1e6:
		if x/1e6 == math.Floor(x/1e6) {
			return fmt.Sprintf("%.0fM", x/1e6)
		}
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.0fK", x/1e3)
	}
	return fmt.Sprint(n)
}

// ollamaModel is an entry of /api/tags and /api/ps.
type ollamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt *time.Time    `json:"modified_at,omitempty"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
	// /api/ps only.
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	SizeVRAM      *int64     `json:"size_vram,omitempty"`
	ContextLength int        `json:"context_length,omitempty"`
}

func (s *server) tags(w http.ResponseWriter, r *http.Request) error {
	list := []ollamaModel{}
	for _, m := range s.sortedModels() {
		mod := m.Modified
		list = append(list, ollamaModel{Name: m.Name, Model: m.Name, ModifiedAt: &mod, Size: m.Size, Digest: m.Digest, Details: detailsOf(m)})
	}
	return writeJSON(w, http.StatusOK, struct {
		Models []ollamaModel `json:"models"`
	}{list})
}

// ps lists the resident model, as Ollama lists its running ones.
func (s *server) ps(w http.ResponseWriter, r *http.Request) error {
	list := []ollamaModel{}
	if info := s.engine.Status().Model; info != nil {
		m, ok := s.lookup(info.Name)
		if !ok {
			m = Model{Name: info.Name, Family: info.Arch}
		}
		e := ollamaModel{Name: m.Name, Model: m.Name, Size: m.Size, Digest: m.Digest, Details: detailsOf(m), ContextLength: info.Context}
		vram := int64(0)
		if total := info.Memory.Total(); total > 0 {
			// On the GPU the model takes its estimate there; on the CPU it
			// takes its file, mapped.
			e.Size, vram = total, total
		}
		e.SizeVRAM = &vram
		if s.o.IdleUnload > 0 {
			last := info.Loaded
			if t := time.Unix(0, s.lastUsed.Load()); t.After(last) {
				last = t
			}
			exp := last.Add(s.o.IdleUnload)
			e.ExpiresAt = &exp
		}
		list = append(list, e)
	}
	return writeJSON(w, http.StatusOK, struct {
		Models []ollamaModel `json:"models"`
	}{list})
}

// ollamaVersion is what /api/version reports. Clients read it to decide
// which Ollama features they may use (tools, structured output), so it is
// the Ollama release whose API this server follows, not Hearth's own
// version.
const ollamaVersion = "0.5.0"

func (s *server) version(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

// showRequest is /api/show's body; Name is its older spelling of Model.
type showRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"`
	Verbose bool   `json:"verbose"`
}

// show describes a model from its GGUF metadata, as Ollama's /api/show does.
// The file is the catalogue's, never one the request names.
func (s *server) show(w http.ResponseWriter, r *http.Request) error {
	var req showRequest
	if err := decode(w, r, s.o.MaxBody, &req); err != nil {
		return err
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	m, err := s.find(ollamaAPI, req.Model)
	if err != nil {
		return err
	}
	path, err := s.o.Models.Resolve(m.Name)
	if err != nil {
		return err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	defer f.Close()

	info := map[string]any{}
	for _, kv := range f.Metadata() {
		if kv.Key == tokenizer.KeyChatTemplate {
			continue // it is "template"
		}
		v := kv.Value.Any()
		if kv.Value.Type() == gguf.ValueArray && !req.Verbose {
			// The vocabulary's arrays run to 100k entries; Ollama sends
			// them only when asked, as empty arrays otherwise.
			v = []any{}
		} else if vs, ok := v.([]gguf.Value); ok {
			v = arrayOf(vs)
		}
		info[kv.Key] = v
	}
	if _, ok := info["general.parameter_count"]; !ok {
		info["general.parameter_count"] = f.ParameterCount()
	}
	template, _ := f.StringOr(tokenizer.KeyChatTemplate, "")

	resp := struct {
		Template     string         `json:"template"`
		Parameters   string         `json:"parameters"`
		Details      ollamaDetails  `json:"details"`
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string       `json:"capabilities"`
		ModifiedAt   time.Time      `json:"modified_at"`
	}{
		Template:     template,
		Parameters:   parameters(f),
		Details:      detailsOf(m),
		ModelInfo:    info,
		Capabilities: []string{"completion"},
		ModifiedAt:   m.Modified,
	}
	// As Ollama: a file that says how to pool is an embedding model, and
	// a model with a projector sees images.
	arch, _ := f.StringOr("general.architecture", "")
	if _, ok := f.Value(arch + ".pooling_type"); ok {
		resp.Capabilities = []string{"embedding"}
	}
	if m.Vision {
		resp.Capabilities = append(resp.Capabilities, "vision")
	}
	if strings.Contains(template, "tools") {
		resp.Capabilities = append(resp.Capabilities, "tools")
	}
	return writeJSON(w, http.StatusOK, resp)
}

// arrayOf is a nested GGUF array as Go values.
func arrayOf(vs []gguf.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		if inner, ok := v.Any().([]gguf.Value); ok {
			out[i] = arrayOf(inner)
		} else {
			out[i] = v.Any()
		}
	}
	return out
}

// parameters lists, in Ollama's "name value" lines, what a request that
// sets nothing gets: the stop strings of the model's chat format and
// /api/chat's sampling defaults.
func parameters(f *gguf.File) string {
	var b strings.Builder
	if tok, err := tokenizer.FromGGUF(f); err == nil {
		if format, err := chat.FromGGUF(f, tok); err == nil {
			for _, s := range format.StopStrings {
				fmt.Fprintf(&b, "%-30s %q\n", "stop", s)
			}
		}
	}
	d := ollamaDefaults()
	fmt.Fprintf(&b, "%-30s %g\n%-30s %d\n%-30s %g\n%-30s %g\n", "temperature", d.Temperature, "top_k", d.TopK, "top_p", d.TopP, "min_p", d.MinP)
	return strings.TrimSuffix(b.String(), "\n")
}
