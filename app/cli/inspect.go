package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/units"
)

// inspectMaxEntries is how many entries of an array inspect shows: a
// vocabulary is 150k strings, and neither a terminal nor a script wants them
// all.
const inspectMaxEntries = 8

// inspectMaxString is how many characters of a string the text form shows;
// chat templates run to several KB. The JSON form keeps strings whole.
const inspectMaxString = 64

func newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE.gguf",
		Short: "Print a GGUF file's metadata and tensor table",
		Long: `Print what a GGUF file holds: architecture, parameter count, file type,
GGUF version, alignment, every metadata key with its type and value, and every
tensor with its type, shape (ggml order: innermost dimension first), offset in
the data section and size in bytes. Arrays longer than 8 entries show their
length and first 8 entries, in both forms.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			rep := newInspectReport(f)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // tokens such as "<s>" stay readable
				return enc.Encode(rep)
			}
			return printInspect(out, f, rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// inspectReport is hearth inspect's --json shape. Metadata entries follow the
// ggml test sidecars: {key, type, value}, or for an array {key, type: "ARRAY",
// array_type, count, value: first entries, truncated}.
type inspectReport struct {
	File           string          `json:"file"`
	FileSize       int64           `json:"file_size"`
	Version        uint32          `json:"version"`
	Alignment      uint64          `json:"alignment"`
	DataOffset     uint64          `json:"data_offset"`
	Architecture   string          `json:"architecture"`
	ParameterCount uint64          `json:"parameter_count"`
	FileType       string          `json:"file_type,omitempty"`
	FileTypeID     *uint32         `json:"file_type_id,omitempty"`
	Metadata       []inspectKV     `json:"metadata"`
	Tensors        []inspectTensor `json:"tensors"`
}

type inspectKV struct {
	Key string `json:"key"`
	inspectValue
}

// inspectValue is one value; for an array its element type, length and first
// entries, each a scalar or, for an array of arrays, an inspectValue itself.
type inspectValue struct {
	Type      string `json:"type"`
	ArrayType string `json:"array_type,omitempty"`
	Count     *int   `json:"count,omitempty"`
	Value     any    `json:"value"`
	Truncated bool   `json:"truncated,omitempty"`
}

type inspectTensor struct {
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	GGMLType  uint32   `json:"ggml_type"`
	Shape     []uint64 `json:"shape"`
	NElements uint64   `json:"n_elements"`
	Offset    uint64   `json:"offset"`
	NBytes    uint64   `json:"nbytes"`
}

func newInspectReport(f *gguf.File) inspectReport {
	rep := inspectReport{
		File:           f.Name(),
		FileSize:       f.Size(),
		Version:        f.Version(),
		Alignment:      f.Alignment(),
		DataOffset:     f.DataOffset(),
		Architecture:   f.Architecture(),
		ParameterCount: f.ParameterCount(),
		Metadata:       []inspectKV{},
		Tensors:        []inspectTensor{},
	}
	if ft, ok := f.FileType(); ok {
		id := uint32(ft)
		rep.FileType, rep.FileTypeID = ft.String(), &id
	}
	for _, kv := range f.Metadata() {
		rep.Metadata = append(rep.Metadata, inspectKV{Key: kv.Key, inspectValue: inspectJSONValue(kv.Value)})
	}
	for _, t := range f.Tensors() {
		rep.Tensors = append(rep.Tensors, inspectTensor{
			Name: t.Name, Type: t.Type.String(), GGMLType: uint32(t.Type), Shape: t.Shape,
			NElements: t.Elements(), Offset: t.Offset, NBytes: t.Size,
		})
	}
	return rep
}

func inspectJSONValue(v gguf.Value) inspectValue {
	if v.Type() != gguf.ValueArray {
		return inspectValue{Type: v.Type().String(), Value: inspectJSONScalar(v)}
	}
	n := v.Len()
	shown := min(n, inspectMaxEntries)
	entries := make([]any, shown)
	for i := range shown {
		e := v.Index(i)
		if e.Type() == gguf.ValueArray {
			entries[i] = inspectJSONValue(e)
		} else {
			entries[i] = inspectJSONScalar(e)
		}
	}
	return inspectValue{Type: "ARRAY", ArrayType: v.ElemType().String(), Count: &n, Value: entries, Truncated: shown < n}
}

// inspectJSONScalar is a scalar as JSON: integers exact, floats in the
// shortest form that reads back to the same float32 or float64, and the
// non-finite floats, which JSON lacks, as the strings "NaN", "+Inf", "-Inf".
func inspectJSONScalar(v gguf.Value) any {
	switch x := v.Any().(type) {
	case float32:
		return inspectJSONFloat(float64(x), 32)
	case float64:
		return inspectJSONFloat(x, 64)
	}
	return v.Any()
}

func inspectJSONFloat(x float64, bits int) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', -1, bits)
	}
	return json.Number(strconv.FormatFloat(x, 'g', -1, bits))
}

func printInspect(w io.Writer, f *gguf.File, rep inspectReport) error {
	ft := "(not set)"
	if rep.FileTypeID != nil {
		ft = fmt.Sprintf("%s (%d)", rep.FileType, *rep.FileTypeID)
	}
	arch := rep.Architecture
	if arch == "" {
		arch = "(not set)"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", rep.File)
	fmt.Fprintf(tw, "size\t%s (%d bytes)\n", units.Bytes(uint64(rep.FileSize)), rep.FileSize)
	fmt.Fprintf(tw, "architecture\t%s\n", inspectText(arch))
	fmt.Fprintf(tw, "parameters\t%s (%d)\n", units.Count(rep.ParameterCount), rep.ParameterCount)
	fmt.Fprintf(tw, "file type\t%s\n", ft)
	fmt.Fprintf(tw, "GGUF version\t%d\n", rep.Version)
	fmt.Fprintf(tw, "alignment\t%d\n", rep.Alignment)
	fmt.Fprintf(tw, "data offset\t%d\n", rep.DataOffset)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nmetadata: %d keys\n", len(rep.Metadata))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE\tVALUE")
	for _, kv := range f.Metadata() {
		typ := kv.Value.Type().String()
		if kv.Value.Type() == gguf.ValueArray {
			typ = fmt.Sprintf("[%s × %d]", kv.Value.ElemType(), kv.Value.Len())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", inspectText(kv.Key), typ, inspectValueText(kv.Value, 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\ntensors: %d\n", len(rep.Tensors))
	// Names, types and shapes left-aligned, offsets and sizes right-aligned.
	rows := [][]string{{"NAME", "TYPE", "SHAPE", "OFFSET", "BYTES"}}
	for _, t := range rep.Tensors {
		rows = append(rows, []string{inspectText(t.Name), t.Type, inspectShape(t.Shape),
			strconv.FormatUint(t.Offset, 10), strconv.FormatUint(t.NBytes, 10)})
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		_, err := fmt.Fprintf(w, "%-*s  %-*s  %-*s  %*s  %*s\n",
			width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], width[4], r[4])
		if err != nil {
			return err
		}
	}
	return nil
}

// inspectValueText is a value on one line: scalars as Go writes them, strings
// quoted and cut, arrays as their first entries and how many more there are.
func inspectValueText(v gguf.Value, depth int) string {
	if v.Type() != gguf.ValueArray {
		switch x := v.Any().(type) {
		case string:
			return inspectQuote(x)
		case float32:
			return strconv.FormatFloat(float64(x), 'g', -1, 32)
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return fmt.Sprint(v.Any())
	}
	n := v.Len()
	if n == 0 {
		return "(empty)"
	}
	shown := min(n, inspectMaxEntries)
	if depth > 0 {
		shown = min(n, 3) // nested arrays: keep the line short
	}
	parts := make([]string, 0, shown+1)
	for i := range shown {
		e := v.Index(i)
		if e.Type() == gguf.ValueArray {
			parts = append(parts, fmt.Sprintf("[%s × %d: %s]", e.ElemType(), e.Len(), inspectValueText(e, depth+1)))
		} else {
			parts = append(parts, inspectValueText(e, depth+1))
		}
	}
	if shown < n {
		parts = append(parts, fmt.Sprintf("… (%d more)", n-shown))
	}
	return strings.Join(parts, ", ")
}

// inspectQuote quotes s, cut to inspectMaxString characters.
func inspectQuote(s string) string {
	if utf8.RuneCountInString(s) <= inspectMaxString {
		return strconv.Quote(s)
	}
	cut, n := s, 0
	for i := range s {
		if n == inspectMaxString {
			cut = s[:i]
			break
		}
		n++
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cut), len(s))
}

// inspectText is a key or name as is, or quoted if it holds characters that
// would break the table (tabs, newlines, invalid UTF-8).
func inspectText(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

func inspectShape(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
