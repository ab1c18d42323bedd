// Package vision runs the image encoders of multimodal models: image
// decoding and preprocessing, the vision towers of mmproj files, and their
// projectors.
//
// Decode and DecodeFile read PNG, JPEG, GIF (the first frame) and WebP
// files, bounded in bytes and pixels so that no file can make them allocate
// more than an image of MaxPixels. Preprocess turns an image into the
// channels-first float32 pixel_values a vision tower takes, as the model's
// Hugging Face image processor does: RGB as PIL's convert("RGB") makes it,
// a bilinear resize to the tower's square input with the reference's own
// fixed-point arithmetic, then rescale and normalize.
package vision
