package training

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/training/data"
)

// A checkpoint is one GGUF file: the run's state as JSON under
// checkpointStateKey, and per LoRA pair its A and B and their AdamW
// moments as F32 tensors. One file, written through atomicfile (a
// temporary file, synced, renamed over the old one), so a kill or a full
// disk during the write leaves the previous checkpoint whole, and a
// checkpoint on disk is always complete.
const (
	checkpointType     = "hearth.checkpoint"
	checkpointStateKey = "hearth.checkpoint.state"
	checkpointVersion  = 1
)

// checkpointTensors are the suffixes of a pair's tensors in a checkpoint,
// in the order they are written.
var checkpointTensors = [...]string{".a", ".b", ".a.adam_m", ".a.adam_v", ".b.adam_m", ".b.adam_v"}

// State is what a checkpoint records besides the tensors: enough to resume
// the run exactly where it stopped and to draw its history.
type State struct {
	Version int `json:"version"`
	// Base identifies the model trained on: a resume onto another model
	// is refused.
	Base BaseInfo `json:"base"`
	// Settings are the run's settings; a resume keeps the ones that shape
	// the adapter and the data (see RunConfig.compatible).
	Settings Settings `json:"settings"`
	// Step is the optimizer steps taken; Steps the run's total.
	Step  int `json:"step"`
	Steps int `json:"steps"`
	// Position is where the data iterator is: the next batch is the one
	// after it.
	Position data.Position `json:"position"`
	// Dropout is the dropout counter of the next micro-batch
	// (GPU.DropoutStep), so a resumed run draws the masks the
	// uninterrupted one would.
	Dropout uint64 `json:"dropout_step,omitempty"`
	// Tokens are the tokens run through the model so far (padding
	// excluded).
	Tokens int64 `json:"tokens"`
	// Seconds is the training time so far, for the throughput across
	// resumes.
	Seconds float64 `json:"seconds"`
	// History holds every step's loss, and the validation losses.
	History []Point `json:"history"`
}

// BaseInfo identifies a base model by its shape and file.
type BaseInfo struct {
	Arch   string `json:"arch"`
	Name   string `json:"name,omitempty"`
	Layers int    `json:"layers"`
	Hidden int    `json:"hidden"`
	Vocab  int    `json:"vocab"`
	Params uint64 `json:"params"`
}

func baseInfo(m *model.Model) BaseInfo {
	b := BaseInfo{Arch: m.Config.Arch, Name: m.Config.Name, Layers: m.Config.Layers, Hidden: m.Config.Hidden, Vocab: m.Config.Vocab}
	if m.File != nil {
		b.Params = m.File.ParameterCount()
	}
	return b
}

// Point is one step's training loss, or a validation loss when Valid is
// set. Loss is the mean over the step's trained positions.
type Point struct {
	Step  int     `json:"step"`
	Loss  float64 `json:"loss"`
	Valid bool    `json:"valid,omitempty"`
}

// Checkpoint is a checkpoint read back.
type Checkpoint struct {
	State State
	LoRA  *LoRA
	Opt   *Optimizer
}

// writeCheckpoint writes the run's state, the adapter and the moments to
// path, atomically.
func writeCheckpoint(path string, st State, lora *LoRA, opt *Optimizer) error {
	err := atomicfile.WriteFrom(path, 0o644, func(out io.Writer) error {
		return encodeCheckpoint(out, st, lora, opt)
	})
	if err != nil {
		return fmt.Errorf("training: checkpoint %s: %w", path, err)
	}
	return nil
}

func encodeCheckpoint(out io.Writer, st State, lora *LoRA, opt *Optimizer) error {
	st.Version = checkpointVersion
	js, err := json.Marshal(st)
	if err != nil {
		return err
	}
	w := gguf.NewWriter(out)
	w.SetString("general.type", checkpointType)
	w.SetString(checkpointStateKey, string(js))
	tensors := make([][]float32, 0, 6*len(lora.Pairs))
	for k, p := range lora.Pairs {
		vals := [...][]float32{p.A, p.B, opt.M[2*k], opt.V[2*k], opt.M[2*k+1], opt.V[2*k+1]}
		for i, suffix := range checkpointTensors {
			// A is Rank × Cols and B Rows × Rank, row-major: GGUF lists
			// the fastest dimension first.
			ne := []uint64{uint64(p.Cols), uint64(p.Rank)}
			if i == 1 || i >= 4 {
				ne = []uint64{uint64(p.Rank), uint64(p.Rows)}
			}
			if err := w.AddTensor(p.Name+suffix, gguf.TypeF32, ne); err != nil {
				return err
			}
			tensors = append(tensors, vals[i])
		}
	}
	for i, v := range tensors {
		p := lora.Pairs[i/len(checkpointTensors)]
		if err := w.WriteTensorBytes(p.Name+checkpointTensors[i%len(checkpointTensors)], gpu.F32Bytes(v)); err != nil {
			return err
		}
	}
	return w.Close()
}

// ReadCheckpoint reads the checkpoint at path for base model m: its state,
// the adapter (rebuilt from the recorded LoRA settings and filled with the
// saved pairs) and the optimizer's moments. A checkpoint of another model,
// or one whose tensors do not match its settings, is an error naming what
// differs.
func ReadCheckpoint(path string, m *model.Model) (*Checkpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("training: checkpoint: %w", err)
	}
	defer f.Close()
	ck, err := decodeCheckpoint(f, m)
	if err != nil {
		return nil, fmt.Errorf("training: checkpoint %s: %w", path, err)
	}
	return ck, nil
}

// ReadState reads only the state of the checkpoint at path: its settings,
// step and history, without a model (a resume starts from its settings).
func ReadState(path string) (State, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return State{}, fmt.Errorf("training: checkpoint: %w", err)
	}
	defer f.Close()
	st, err := decodeState(f)
	if err != nil {
		return State{}, fmt.Errorf("training: checkpoint %s: %w", path, err)
	}
	return st, nil
}

func decodeState(f *gguf.File) (State, error) {
	var st State
	if typ, _ := f.StringOr("general.type", ""); typ != checkpointType {
		return st, fmt.Errorf("not a Hearth training checkpoint (general.type %q)", typ)
	}
	js, err := f.String(checkpointStateKey)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		return st, fmt.Errorf("%s: %w", checkpointStateKey, err)
	}
	if st.Version != checkpointVersion {
		return st, fmt.Errorf("version %d; this Hearth reads version %d", st.Version, checkpointVersion)
	}
	return st, nil
}

func decodeCheckpoint(f *gguf.File, m *model.Model) (*Checkpoint, error) {
	st, err := decodeState(f)
	if err != nil {
		return nil, err
	}
	if base := baseInfo(m); st.Base != base {
		return nil, fmt.Errorf("it was made on %s, not on %s", st.Base, base)
	}
	if st.Step < 0 || st.Step > st.Steps {
		return nil, fmt.Errorf("step %d of %d", st.Step, st.Steps)
	}
	for _, p := range st.History {
		if math.IsNaN(p.Loss) {
			return nil, errors.New("a NaN loss in its history")
		}
	}
	lora, err := NewLoRA(m, st.Settings.LoRA, 0)
	if err != nil {
		return nil, err
	}
	opt := NewOptimizer(lora, st.Settings.AdamW)
	opt.Steps = st.Step
	want := 0
	for k, p := range lora.Pairs {
		dst := [...][]float32{p.A, p.B, opt.M[2*k], opt.V[2*k], opt.M[2*k+1], opt.V[2*k+1]}
		for i, suffix := range checkpointTensors {
			name := p.Name + suffix
			t, ok := f.Tensor(name)
			if !ok {
				return nil, fmt.Errorf("tensor %s is missing", name)
			}
			if t.Type != gguf.TypeF32 || t.Elements() != uint64(len(dst[i])) {
				return nil, fmt.Errorf("tensor %s: %v of %d values, want F32 of %d", name, t.Type, t.Elements(), len(dst[i]))
			}
			raw, err := f.Data(t)
			if err != nil {
				return nil, err
			}
			copy(dst[i], gpu.F32From(raw))
			want++
		}
	}
	if n := len(f.Tensors()); n != want {
		return nil, fmt.Errorf("%d tensors, the adapter it describes has %d", n, want)
	}
	return &Checkpoint{State: st, LoRA: lora, Opt: opt}, nil
}

func (b BaseInfo) String() string {
	name := b.Name
	if name == "" {
		name = b.Arch
	}
	return fmt.Sprintf("%s (%s, %d layers of %d, vocabulary %d, %d parameters)", name, b.Arch, b.Layers, b.Hidden, b.Vocab, b.Params)
}
