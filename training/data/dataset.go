package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

const (
	// DefaultValid is the fraction of the source lines held out for
	// validation when Options.Valid is 0.
	DefaultValid = 0.05
	// DefaultMaxLineBytes is the longest JSONL line read: a line longer
	// than this is an error naming it, not an allocation of its size.
	DefaultMaxLineBytes = 16 << 20
	// maxNotes is how many lines a Report names for each kind of note.
	maxNotes = 5
)

// Options say how a dataset becomes sequences.
type Options struct {
	// SeqLen is the number of positions of a sequence (at least 2); it
	// should not exceed the model's context.
	SeqLen int
	// Valid is the fraction of the source lines held out for validation:
	// 0 means DefaultValid, a negative value none. The split is at least
	// one line and never every line when there are two or more.
	Valid float64
	// ValidCount, if positive, is the number of lines held out instead.
	ValidCount int
	// Seed chooses the validation lines.
	Seed uint64
	// DropLong skips samples longer than SeqLen instead of truncating
	// them.
	DropLong bool
	// NoPacking gives every sample a sequence of its own.
	NoPacking bool
	// MaxLineBytes is the longest JSONL line; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// Vars are chat template variables (enable_thinking, …).
	Vars map[string]any
	// Progress, if not nil, is told by Load the bytes of the file read so
	// far and its size, after each read (JSONL lines are tokenized as they
	// are read, a .txt file once it is whole).
	Progress func(done, total int64)
}

// Note is a line a Report names, and why.
type Note struct {
	Line   int
	Reason string
}

func (n Note) String() string { return fmt.Sprintf("line %d: %s", n.Line, n.Reason) }

// Report says what Load made of a dataset.
type Report struct {
	Path  string
	Lines int // source records read: JSONL objects, or .txt pieces

	Samples       int // samples kept
	Tokens        int // their tokens
	TrainedTokens int // their positions with a loss

	// Skipped samples had nothing to train on (or were too long, with
	// DropLong); SkippedLines names the first few.
	Skipped      int
	SkippedLines []Note
	// Truncated samples were cut to SeqLen.
	Truncated      int
	TruncatedLines []Note
	// Resegmented samples were tokenized segment by segment because a
	// token crossed a span boundary; PerTurn conversations became one
	// sample per assistant turn because the template renders history
	// differently (see the package doc).
	Resegmented, PerTurn int

	TrainSamples, ValidSamples     int
	TrainSequences, ValidSequences int
	Padding                        int // padding positions in all sequences

	Notices []string
}

// String is the report for a person: counts, then the lines it names.
func (r Report) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %d samples from %d lines, %d tokens, %d trained\n", r.Path, r.Samples, r.Lines, r.Tokens, r.TrainedTokens)
	fmt.Fprintf(&sb, "train: %d samples in %d sequences; validation: %d samples in %d sequences; %d padding positions\n",
		r.TrainSamples, r.TrainSequences, r.ValidSamples, r.ValidSequences, r.Padding)
	if r.Skipped > 0 {
		fmt.Fprintf(&sb, "skipped %d samples:", r.Skipped)
		for _, n := range r.SkippedLines {
			fmt.Fprintf(&sb, " %s;", n)
		}
		sb.WriteString("\n")
	}
	if r.Truncated > 0 {
		fmt.Fprintf(&sb, "truncated %d samples:", r.Truncated)
		for _, n := range r.TruncatedLines {
			fmt.Fprintf(&sb, " %s;", n)
		}
		sb.WriteString("\n")
	}
	for _, n := range r.Notices {
		sb.WriteString(n + "\n")
	}
	return sb.String()
}

func (r *Report) skip(line int, why string) {
	r.Skipped++
	if len(r.SkippedLines) < maxNotes {
		r.SkippedLines = append(r.SkippedLines, Note{line, why})
	}
}

// Dataset is a dataset's training and validation sequences.
type Dataset struct {
	SeqLen       int
	Train, Valid *Set
	// Fingerprint identifies the sequences: a Position from a different
	// dataset, or the same file read with other options, is refused.
	Fingerprint string
}

// Set is the samples of one side of the split and their sequences.
type Set struct {
	Samples   []Sample
	Sequences []*Sequence
}

// Load reads the dataset at path: a .txt file as plain text, anything else
// as JSONL (see the package doc). tok is the model's tokenizer and format
// its chat format (Model.Chat, or chat.FromGGUF), needed for
// conversations.
func Load(path string, tok *tokenizer.Tokenizer, format *chat.Format, o Options) (*Dataset, Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Report{Path: path}, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if o.Progress != nil {
		st, err := f.Stat()
		if err != nil {
			return nil, Report{Path: path}, fmt.Errorf("data: %w", err)
		}
		o.Progress(0, st.Size())
		r = &countingReader{r: f, total: st.Size(), progress: o.Progress}
	}
	return Read(r, path, tok, format, o)
}

// countingReader tells progress the bytes read through it.
type countingReader struct {
	r           io.Reader
	done, total int64
	progress    func(done, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.done += int64(n)
		c.progress(c.done, c.total)
	}
	return n, err
}

// Read reads a dataset from r; name is its file name, whose extension
// says whether it is plain text (.txt) or JSONL, and which errors name.
func Read(r io.Reader, name string, tok *tokenizer.Tokenizer, format *chat.Format, o Options) (*Dataset, Report, error) {
	rep := Report{Path: name}
	if tok == nil {
		return nil, rep, errors.New("data: no tokenizer")
	}
	if o.SeqLen < 2 {
		return nil, rep, fmt.Errorf("data: sequence length %d: want at least 2", o.SeqLen)
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	b := &builder{tok: tok, format: format, vars: o.Vars}
	var samples []Sample
	var groups []int // samples[i] belongs to source record groups[i]

	keep := func(group int, s Sample) {
		if len(s.Tokens) > o.SeqLen {
			why := fmt.Sprintf("%d tokens, longer than the sequence length %d", len(s.Tokens), o.SeqLen)
			if o.DropLong {
				rep.skip(s.Line, why)
				return
			}
			rep.Truncated++
			if len(rep.TruncatedLines) < maxNotes {
				rep.TruncatedLines = append(rep.TruncatedLines, Note{s.Line, why})
			}
			s.Tokens, s.Targets = s.Tokens[:o.SeqLen], s.Targets[:o.SeqLen]
		}
		if s.Trained() == 0 {
			why := "no trained token"
			if len(s.Tokens) == o.SeqLen {
				why = fmt.Sprintf("no trained token in the first %d", o.SeqLen)
			}
			rep.skip(s.Line, why)
			return
		}
		samples = append(samples, s)
		groups = append(groups, group)
	}

	if strings.EqualFold(filepath.Ext(name), ".txt") {
		text, err := io.ReadAll(r)
		if err != nil {
			return nil, rep, &LineError{name, 0, err}
		}
		text = bytes.TrimPrefix(text, bom)
		if len(bytes.TrimSpace(text)) == 0 {
			return nil, rep, &LineError{name, 0, errors.New("empty dataset: the file holds no text")}
		}
		pieces := textPieces(b.withEOS(b.encodeText(string(text))), o.SeqLen)
		rep.Lines = len(pieces)
		for i, s := range pieces {
			keep(i, s)
		}
	} else {
		err := readJSONL(r, name, o.MaxLineBytes, func(line int, raw []byte) error {
			rep.Lines++
			rec, err := parseLine(raw)
			if err != nil {
				return &LineError{name, line, err}
			}
			rec.line = line
			ss, err := b.samples(rec)
			if err != nil {
				return &LineError{name, line, err}
			}
			if len(ss) == 0 {
				why := "no trained token"
				switch {
				case rec.kind == kindText:
					why = "empty text"
				case rec.kind == kindChat:
					why = "no assistant message"
				}
				rep.skip(line, why)
			}
			for _, s := range ss {
				keep(line, s)
			}
			return nil
		})
		if err != nil {
			return nil, rep, err
		}
	}
	rep.Resegmented, rep.PerTurn = b.resegmented, b.perTurn
	if b.chats > 0 && format.Template == nil {
		rep.Notices = append(rep.Notices, format.Notice)
	}
	if len(samples) == 0 {
		why := "empty dataset: no samples"
		if rep.Skipped > 0 {
			why = fmt.Sprintf("empty dataset: all %d samples were skipped (%s)", rep.Skipped, rep.SkippedLines[0])
		}
		return nil, rep, &LineError{name, 0, errors.New(why)}
	}

	trainIdx, validIdx := split(groups, o)
	if len(validIdx) == 0 {
		rep.Notices = append(rep.Notices, "one source line: no validation split")
	}
	pad := padToken(tok)
	d := &Dataset{SeqLen: o.SeqLen}
	d.Train = makeSet(samples, trainIdx, o.SeqLen, pad, !o.NoPacking)
	d.Valid = makeSet(samples, validIdx, o.SeqLen, pad, !o.NoPacking)
	d.Fingerprint = d.fingerprint()

	for _, s := range samples {
		rep.Samples++
		rep.Tokens += len(s.Tokens)
		rep.TrainedTokens += s.Trained()
	}
	rep.TrainSamples, rep.ValidSamples = len(d.Train.Samples), len(d.Valid.Samples)
	rep.TrainSequences, rep.ValidSequences = len(d.Train.Sequences), len(d.Valid.Sequences)
	rep.Padding = (rep.TrainSequences+rep.ValidSequences)*o.SeqLen - rep.Tokens
	return d, rep, nil
}

// split chooses the validation samples: whole source groups (every sample
// of a conversation on one side), taken from a seeded permutation of the
// groups, at least one and never all of them when there are two or more.
func split(groups []int, o Options) (train, valid []int) {
	var ids []int // distinct groups, in order
	for i, g := range groups {
		if i == 0 || g != groups[i-1] {
			ids = append(ids, g)
		}
	}
	n := len(ids)
	var k int
	switch {
	case o.ValidCount > 0:
		k = o.ValidCount
	case o.Valid < 0:
		k = 0
	default:
		f := o.Valid
		if f == 0 {
			f = DefaultValid
		}
		k = int(math.Round(f * float64(n)))
		k = max(k, 1)
	}
	if n < 2 {
		k = 0
	}
	k = min(k, n-1)
	held := make(map[int]bool, k)
	for _, j := range permutation(n, o.Seed, splitStream)[:k] {
		held[ids[j]] = true
	}
	for i, g := range groups {
		if held[g] {
			valid = append(valid, i)
		} else {
			train = append(train, i)
		}
	}
	return train, valid
}

// splitStream is the PCG stream of the validation split, apart from the
// epochs' streams (0, 1, …).
const splitStream = 0x5a17_d474_5e7_0000

func makeSet(samples []Sample, idx []int, seqLen int, pad int32, packing bool) *Set {
	s := &Set{Samples: make([]Sample, len(idx))}
	for j, i := range idx {
		s.Samples[j] = samples[i]
	}
	s.Sequences = pack(s.Samples, seqLen, pad, packing)
	return s
}

// padToken is the vocabulary's pad token, else EOS, else 0: padding has no
// loss, so any id does; a real one keeps embeddings lookups in range.
func padToken(tok *tokenizer.Tokenizer) int32 {
	v := tok.Vocab()
	switch {
	case v.PAD != tokenizer.None:
		return v.PAD
	case v.EOS != tokenizer.None:
		return v.EOS
	}
	return 0
}

func (d *Dataset) fingerprint() string {
	h := sha256.New()
	var buf [4]byte
	put := func(v int32) {
		binary.LittleEndian.PutUint32(buf[:], uint32(v))
		h.Write(buf[:])
	}
	put(int32(d.SeqLen))
	for _, set := range []*Set{d.Train, d.Valid} {
		put(int32(len(set.Sequences)))
		for _, s := range set.Sequences {
			for i := range s.Tokens {
				put(s.Tokens[i])
				put(s.Targets[i])
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Position is where an Iterator is: saved in a checkpoint, it lets a
// resumed run continue with the same next batch.
type Position struct {
	Seed  uint64 `json:"seed"`
	Epoch int    `json:"epoch"` // from 0
	Index int    `json:"index"` // sequences of the epoch already given
	// Data is the Dataset's Fingerprint.
	Data string `json:"data,omitempty"`
}

// Iterator gives a Set's sequences in a seeded order that changes each
// epoch, without end.
type Iterator struct {
	set   *Set
	data  string
	pos   Position
	order []int
}

// Batches iterates over the training sequences in an order drawn from seed.
func (d *Dataset) Batches(seed uint64) *Iterator {
	it := &Iterator{set: d.Train, data: d.Fingerprint}
	it.pos = Position{Seed: seed, Data: d.Fingerprint}
	it.order = permutation(len(it.set.Sequences), seed, 0)
	return it
}

// Next is the next sequence, moving to the next epoch after the last of
// this one. The order of each epoch is a function of the seed and the
// epoch, so a Position restores it without replaying earlier ones.
func (it *Iterator) Next() *Sequence {
	n := len(it.set.Sequences)
	if n == 0 {
		return nil
	}
	if it.pos.Index == n {
		it.pos.Epoch++
		it.pos.Index = 0
		it.order = permutation(n, it.pos.Seed, uint64(it.pos.Epoch))
	}
	s := it.set.Sequences[it.order[it.pos.Index]]
	it.pos.Index++
	return s
}

// Batch is the next n sequences; a batch may span two epochs.
func (it *Iterator) Batch(n int) []*Sequence {
	out := make([]*Sequence, n)
	for i := range out {
		out[i] = it.Next()
	}
	return out
}

// Position is where the iterator is: Next gives the sequence after it.
func (it *Iterator) Position() Position { return it.pos }

// Seek moves the iterator to p, a Position of this dataset, seed included.
func (it *Iterator) Seek(p Position) error {
	if p.Data != "" && p.Data != it.data {
		return fmt.Errorf("data: the position is in dataset %s, this is %s: the dataset or its options changed", p.Data, it.data)
	}
	if p.Epoch < 0 || p.Index < 0 || p.Index > len(it.set.Sequences) {
		return fmt.Errorf("data: position epoch %d, index %d is outside the %d sequences", p.Epoch, p.Index, len(it.set.Sequences))
	}
	p.Data = it.data
	it.pos = p
	it.order = permutation(len(it.set.Sequences), p.Seed, uint64(p.Epoch))
	return nil
}
