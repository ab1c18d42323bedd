// Package ref holds the CPU reference of every kernel in engine/ops, with the
// same names: plain f32 loops written for clarity, the oracle the GPU parity
// tests compare against and the CPU backend's building blocks.
package ref
