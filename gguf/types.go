package gguf

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type, the id stored in a GGUF tensor info.
type Type uint32

// The ggml type ids (ggml.h, enum ggml_type). Gaps are ids ggml retired; a file
// that uses one is refused.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

// typeTraits is the block geometry of one type: BlockSize elements are stored
// in TypeSize bytes (ggml's blck_size and type_size).
type typeTraits struct {
	name      string
	blockSize int
	typeSize  int
}

var traits = map[Type]typeTraits{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 18},
	TypeQ4_1:    {"Q4_1", 32, 20},
	TypeQ5_0:    {"Q5_0", 32, 22},
	TypeQ5_1:    {"Q5_1", 32, 24},
	TypeQ8_0:    {"Q8_0", 32, 34},
	TypeQ8_1:    {"Q8_1", 32, 36},
	TypeQ2_K:    {"Q2_K", 256, 84},
	TypeQ3_K:    {"Q3_K", 256, 110},
	TypeQ4_K:    {"Q4_K", 256, 144},
	TypeQ5_K:    {"Q5_K", 256, 176},
	TypeQ6_K:    {"Q6_K", 256, 210},
	TypeQ8_K:    {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S:   {"IQ1_S", 256, 50},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18},
	TypeIQ3_S:   {"IQ3_S", 256, 110},
	TypeIQ2_S:   {"IQ2_S", 256, 82},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 56},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", 256, 54},
	TypeTQ2_0:   {"TQ2_0", 256, 66},
	TypeMXFP4:   {"MXFP4", 32, 17},
}

// Known reports whether t is a type id ggml defines.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// String is ggml's name of the type ("Q4_K"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for plain types).
func (t Type) BlockSize() int { return traits[t].blockSize }

// TypeSize is the number of bytes one block occupies.
func (t Type) TypeSize() int { return traits[t].typeSize }

// RowSize is the number of bytes n elements of type t occupy. n must be a
// multiple of the block size; ok is false otherwise or for an unknown type.
func (t Type) RowSize(n int64) (size int64, ok bool) {
	tr, known := traits[t]
	if !known || n < 0 || n%int64(tr.blockSize) != 0 {
		return 0, false
	}
	return n / int64(tr.blockSize) * int64(tr.typeSize), true
}

// ParseType finds a type by its ggml name, case-insensitively ("q4_k" → TypeQ4_K).
func ParseType(name string) (Type, error) {
	for t, tr := range traits {
		if strings.EqualFold(tr.name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown tensor type %q", name)
}
