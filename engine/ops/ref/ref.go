// Package ref holds the CPU reference of every kernel in engine/ops, with the
// same names: plain f32 loops written for clarity, the oracle the GPU parity
// tests compare against and the CPU backend's building blocks. The one
// exception is the penalty kernel: its reference is sample.Penalize, because
// the CPU sampler applies the same penalties and the formula should have one
// definition, in the package that uses it outside tests.
package ref
