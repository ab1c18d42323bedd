// Package safetensors reads and writes safetensors, the tensor file format
// of Hugging Face (model weights, PEFT adapters, converted PyTorch
// checkpoints).
//
// A file is an 8-byte little-endian header length, a JSON object
// {name: {dtype, shape, data_offsets: [begin, end]}} with an optional
// "__metadata__" object of strings, then the data, the offsets counting
// from the end of the header. Open checks the whole header against the file
// before anything is read — known dtypes, sizes that match dtype and shape,
// ranges inside the file that do not overlap, no name twice — so that a
// truncated, corrupt or hostile file is an error that names the file and
// the tensor, never a panic or an allocation larger than the file. Tensor
// data is read on demand, so a model is never held in memory. Write and
// WriteFile lay the data out in name order, so that one set of tensors
// always gives the same bytes, after a header padded with spaces to a
// multiple of 8 bytes as the reference writer pads it.
package safetensors
